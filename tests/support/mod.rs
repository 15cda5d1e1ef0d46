pub mod trace_rows;
