//! The lab's settings: those no broker reads (the design to simulate, the memory model's buffers,
//! storage latency, what the lab does where Pulsar is not what it meant). Which settings these are
//! is [`super::sources::SETTINGS`]'s call.

use super::{boolean, fraction, non_negative, not_of_layer, CacheConfig, SettingValue};
use crate::error::{Error, Result};

impl CacheConfig {
    /// Sets one of the lab's settings, checking only the value itself (`name` is one of them).
    pub(super) fn assign_lab(&mut self, name: &'static str, value: SettingValue) -> Result<()> {
        match name {
            "eviction_trigger_threshold" => {
                self.eviction_trigger_threshold = fraction(name, &value)?
            }
            "strategy" => match &value {
                SettingValue::Str(s) => self.strategy = s.parse()?,
                other => {
                    return Err(Error::invalid(
                        "strategy",
                        format!("expected a string, got {other:?}"),
                    ))
                }
            },
            "recv_buffer_min_bytes"
            | "recv_buffer_initial_bytes"
            | "recv_buffer_max_bytes"
            | "storage_read_buffer_bytes" => {
                let v = non_negative(name, &value)?;
                if !(16..=1 << 30).contains(&v) {
                    return Err(Error::invalid(
                        name,
                        format!("must be in [16, 2^30] bytes, got {v}"),
                    ));
                }
                let v = v as u32;
                match name {
                    "recv_buffer_min_bytes" => self.recv_buffer_min_bytes = v,
                    "recv_buffer_initial_bytes" => self.recv_buffer_initial_bytes = v,
                    "recv_buffer_max_bytes" => self.recv_buffer_max_bytes = v,
                    _ => self.storage_read_buffer_bytes = v,
                }
            }
            "storage_read_latency_ms" => self.storage_read_latency_ms = non_negative(name, &value)?,
            "cursor_epochs" => self.cursor_epochs = boolean(name, &value)?,
            "memory_model" => self.memory_model = boolean(name, &value)?,
            "apply_continue_caching_window" => {
                self.apply_continue_caching_window = match value {
                    SettingValue::None => None,
                    ref v => Some(boolean(name, v)?),
                }
            }
            "exact_cursor_counts" => {
                self.exact_cursor_counts = match value {
                    SettingValue::None => None,
                    ref v => Some(boolean(name, v)?),
                }
            }
            "expected_read_on_every_redelivery" => {
                self.expected_read_on_every_redelivery = boolean(name, &value)?
            }
            "segment_count" => {
                let v = non_negative(name, &value)?;
                if v > 1 << 16 {
                    return Err(Error::invalid(
                        "segment_count",
                        format!("must be in [0, 65536] (0: one per GiB, at least 2), got {v}"),
                    ));
                }
                self.segment_count = v as u32;
            }

            _ => return Err(not_of_layer(name, "lab")),
        }
        Ok(())
    }

    /// Reads one of the lab's settings.
    pub(super) fn get_lab(&self, key: &str) -> Option<SettingValue> {
        Some(match key {
            "eviction_trigger_threshold" => SettingValue::Float(self.eviction_trigger_threshold),
            "strategy" => SettingValue::Str(self.strategy.name().to_string()),
            "segment_count" => SettingValue::Int(self.segment_count as i64),
            "recv_buffer_min_bytes" => SettingValue::Int(self.recv_buffer_min_bytes as i64),
            "recv_buffer_initial_bytes" => SettingValue::Int(self.recv_buffer_initial_bytes as i64),
            "recv_buffer_max_bytes" => SettingValue::Int(self.recv_buffer_max_bytes as i64),
            "storage_read_buffer_bytes" => SettingValue::Int(self.storage_read_buffer_bytes as i64),
            "storage_read_latency_ms" => SettingValue::Int(self.storage_read_latency_ms as i64),
            "cursor_epochs" => SettingValue::Bool(self.cursor_epochs),
            "apply_continue_caching_window" => match self.apply_continue_caching_window {
                Some(b) => SettingValue::Bool(b),
                None => SettingValue::None,
            },
            "exact_cursor_counts" => match self.exact_cursor_counts {
                Some(b) => SettingValue::Bool(b),
                None => SettingValue::None,
            },
            "expected_read_on_every_redelivery" => {
                SettingValue::Bool(self.expected_read_on_every_redelivery)
            }
            "memory_model" => SettingValue::Bool(self.memory_model),
            _ => return None,
        })
    }

    /// Checks the relations between the lab's settings.
    pub(super) fn validate_lab(&self) -> Result<()> {
        if !(self.recv_buffer_min_bytes <= self.recv_buffer_initial_bytes
            && self.recv_buffer_initial_bytes <= self.recv_buffer_max_bytes)
        {
            return Err(Error::invalid(
                "recv_buffer_initial_bytes",
                "receive buffer sizes must satisfy min <= initial <= max",
            ));
        }
        Ok(())
    }
}
