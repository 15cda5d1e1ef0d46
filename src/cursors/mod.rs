pub mod active;
mod chunk;
pub mod heap;
mod position_counts;
mod position_key;
