pub mod active;
pub mod heap;
