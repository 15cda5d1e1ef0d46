pub mod active;
pub mod heap;
mod position_counts;
