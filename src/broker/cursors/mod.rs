pub mod active;
mod chunk;
pub mod heap;
pub mod java_hash_map;
mod position_counts;
mod position_key;
pub mod pulsar_list;
