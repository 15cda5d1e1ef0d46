use super::args::{get_opt, Int};
use super::errors::{raise, IntoPyResult};
use crate::config::{sources, CacheConfig, SettingValue, SETTING_NAMES};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyMapping, PyString, PyTuple};
use std::io::Read;

/// CacheConfig(**settings): the entry cache's settings, frozen.
///
/// Keywords are snake_case forms of Pulsar's broker settings, or the lab's own; unknown keywords
/// and out-of-range values raise. ``replace(**changes)`` returns a modified copy.
/// ``CacheConfig.settings()`` says for each setting whether it is a ``broker.conf`` key (and which
/// Pulsar lines read it) or lab-only, and what Pulsar really does with it; lab-only settings cannot
/// be applied to a broker. Defaults model Pulsar as shipped, except
/// ``apply_continue_caching_window=None``, which applies the window in the library (ManagedLedger)
/// and not in the replay lab, and ``exact_cursor_counts=None``, which counts cursors right in the
/// library and as Pulsar's container does in the replay lab.
#[pyclass(
    name = "CacheConfig",
    module = "ledgercache",
    frozen,
    eq,
    from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyCacheConfig(pub CacheConfig);

pub(super) fn to_setting(
    py: Python<'_>,
    key: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<SettingValue> {
    Ok(if value.is_none() {
        SettingValue::None
    } else if value.is_instance_of::<PyBool>() {
        SettingValue::Bool(value.extract()?)
    } else if value.is_instance_of::<PyInt>() {
        match value.extract::<i64>() {
            Ok(i) => SettingValue::Int(i),
            Err(_) => {
                return Err(raise(
                    py,
                    "InvalidArgumentError",
                    format!("invalid {key}: {value} is out of range"),
                ))
            }
        }
    } else if value.is_instance_of::<PyFloat>() {
        SettingValue::Float(value.extract()?)
    } else if value.is_instance_of::<PyString>() {
        SettingValue::Str(value.extract()?)
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "invalid {key}: expected bool, int, float, str or None, got {}",
            value.get_type().name()?
        )));
    })
}

fn from_setting(py: Python<'_>, v: SettingValue) -> PyResult<Py<PyAny>> {
    Ok(match v {
        SettingValue::None => py.None(),
        SettingValue::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        SettingValue::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        SettingValue::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        SettingValue::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

fn apply(
    py: Python<'_>,
    mut config: CacheConfig,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<CacheConfig> {
    if let Some(settings) = settings {
        let mut pairs = Vec::with_capacity(settings.len());
        for (k, v) in settings.iter() {
            let key: String = k.extract()?;
            let value = to_setting(py, &key, &v)?;
            pairs.push((key, value));
        }
        // All at once: relations between settings are checked after every keyword is in.
        config
            .set_all(pairs.iter().map(|(k, v)| (k.as_str(), v.clone())))
            .py_err(py)?;
    }
    Ok(config)
}

#[pymethods]
impl PyCacheConfig {
    #[new]
    #[pyo3(signature = (**settings))]
    fn new(py: Python<'_>, settings: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyCacheConfig(apply(py, CacheConfig::default(), settings)?))
    }

    /// A copy with `changes` applied.
    #[pyo3(signature = (**changes))]
    fn replace(&self, py: Python<'_>, changes: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyCacheConfig(apply(py, self.0.clone(), changes)?))
    }

    /// Reads Pulsar ``broker.conf`` settings from a file path or a mapping of key -> value, as a
    /// broker applies them; unrelated keys are ignored. A key no Pulsar reads
    /// (``managedLedgerCacheEvictionTriggerThresholdPercent``,
    /// ``brokerAdaptiveRecvByteBufAllocator*``) is not applied; the two extend-TTL keys, which a
    /// broker applies only when changed at run time, are applied only with
    /// ``extend_ttl_at_startup=True``; each of these, and the continue-caching key (read, never
    /// applied by Pulsar), raises a ``BrokerConfWarning`` naming the key.
    ///
    /// A key with an empty value keeps Pulsar's default, as a broker does. The cache size's
    /// default (``managedLedgerCacheSizeMB`` empty or absent) is a fifth of the JVM's direct
    /// memory, at least 64 MiB: give ``direct_memory_bytes`` to have it computed; without, the
    /// lab's default stays and an empty key raises a ``BrokerConfWarning`` saying so. Errors
    /// name the file, the key and the value.
    #[staticmethod]
    #[pyo3(signature = (source, *, extend_ttl_at_startup = false, direct_memory_bytes = None))]
    fn from_broker_conf(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        extend_ttl_at_startup: bool,
        direct_memory_bytes: Option<Int>,
    ) -> PyResult<Self> {
        let direct_memory_bytes = get_opt::<u64>(py, direct_memory_bytes, "direct_memory_bytes")?;
        let pairs = conf_pairs(py, source)?;
        let (config, report) = CacheConfig::from_broker_conf(
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            extend_ttl_at_startup,
            direct_memory_bytes,
        )
        .or_else(|e| match (&e, source.extract::<std::path::PathBuf>()) {
            (crate::error::Error::InvalidArgument { .. }, Ok(path)) => Err(raise(
                py,
                "InvalidArgumentError",
                format!("{}: {e}", path.display()),
            )),
            _ => Err(e).py_err(py),
        })?;
        let category = py
            .import("ledgercache.errors")?
            .getattr("BrokerConfWarning")?;
        for w in report.warnings {
            let message = std::ffi::CString::new(w)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
            PyErr::warn(py, &category, &message, 1)?;
        }
        Ok(PyCacheConfig(config))
    }

    /// Every setting with where it comes from: ``name``, ``default``, ``broker_key`` (the
    /// ``broker.conf`` key, or None for the lab's own), ``layer`` (``"broker"`` for a setting with
    /// a ``broker.conf`` key, which configures a broker or the library's manager; ``"lab"`` for the
    /// lab's own), ``read_by`` (the Pulsar lines that read the key), ``note`` (what Pulsar does
    /// with it, where that is not what its name says) and ``live``.
    #[staticmethod]
    fn settings<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let defaults = CacheConfig::default();
        sources::SETTINGS
            .iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("name", s.name)?;
                d.set_item(
                    "default",
                    from_setting(py, defaults.get(s.name).expect("known name"))?,
                )?;
                let (key, read_by) = match s.source {
                    sources::Source::Broker { key, read_by, .. } => (Some(key), Some(read_by)),
                    sources::Source::Lab => (None, None),
                };
                d.set_item("broker_key", key)?;
                d.set_item("layer", s.layer())?;
                d.set_item("read_by", read_by)?;
                d.set_item("note", s.note)?;
                d.set_item(
                    "live",
                    crate::cache::manager::LIVE_SETTINGS.contains(&s.name),
                )?;
                Ok(d)
            })
            .collect()
    }

    /// The names of the broker's settings (those with a ``broker.conf`` key), in declaration order.
    #[classattr]
    #[allow(
        non_snake_case,
        reason = "a Python class attribute, named as constants are"
    )]
    fn BROKER_SETTINGS<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let names: Vec<&str> = sources::of_layer("broker").map(|s| s.name).collect();
        PyTuple::new(py, names)
    }

    /// The names of the lab's own settings (no broker reads them), in declaration order.
    #[classattr]
    #[allow(
        non_snake_case,
        reason = "a Python class attribute, named as constants are"
    )]
    fn LAB_SETTINGS<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let names: Vec<&str> = sources::of_layer("lab").map(|s| s.name).collect();
        PyTuple::new(py, names)
    }

    /// The settings as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for name in SETTING_NAMES {
            d.set_item(
                name,
                from_setting(py, self.0.get(name).expect("known name"))?,
            )?;
        }
        Ok(d)
    }

    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        match self.0.get(name) {
            Some(v) => from_setting(py, v),
            None => Err(pyo3::exceptions::PyAttributeError::new_err(format!(
                "CacheConfig has no setting {name:?}"
            ))),
        }
    }

    fn __dir__(&self) -> Vec<&'static str> {
        let mut names = SETTING_NAMES.to_vec();
        names.extend([
            "replace",
            "from_broker_conf",
            "to_dict",
            "settings",
            "BROKER_SETTINGS",
            "LAB_SETTINGS",
        ]);
        names
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::new();
        for name in SETTING_NAMES {
            let v = from_setting(py, self.0.get(name).expect("known name"))?;
            parts.push(format!("{name}={}", v.bind(py).repr()?));
        }
        Ok(format!("CacheConfig({})", parts.join(", ")))
    }

    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        Ok((PyTuple::empty(py), self.to_dict(py)?))
    }
}

/// The `key = value` pairs of a broker.conf file path, or of a mapping of key -> value (booleans
/// as `true`/`false`, everything else as its `str`).
fn conf_pairs(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    Ok(if let Ok(mapping) = source.cast::<PyMapping>() {
        let mut pairs = Vec::new();
        for item in mapping.items()?.iter() {
            let (k, v): (String, Bound<'_, PyAny>) = item.extract()?;
            let text = if v.is_instance_of::<PyBool>() {
                if v.extract::<bool>()? {
                    "true".to_string()
                } else {
                    "false".to_string()
                }
            } else {
                v.str()?.to_string()
            };
            pairs.push((k, text));
        }
        pairs
    } else {
        let path: std::path::PathBuf = source.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(
                "a broker.conf is a path or a mapping of broker.conf keys",
            )
        })?;
        let fail = |why: String| {
            raise(
                py,
                "InvalidArgumentError",
                format!("invalid broker_conf: {}: {why}", path.display()),
            )
        };
        // Bounded, so that a path such as /dev/zero cannot take the memory: Pulsar's own
        // broker.conf is under 100 KiB.
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_BROKER_CONF_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(format!("cannot read it: {e}")))?;
        if bytes.len() as u64 > MAX_BROKER_CONF_BYTES {
            return Err(fail(format!(
                "more than {MAX_BROKER_CONF_BYTES} bytes: not a broker.conf"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        parse_properties(&text)
    })
}

/// The cache designs, in order: each as a dict of ``name`` (the strategy), ``label`` (the name
/// operators know it by), ``models`` (what the lab simulates), ``role`` (``"broker"``: a Pulsar
/// release runs it; ``"proposal"``, ``"reference"`` or ``"bound"``: shown for comparison only)
/// ``broker_settings`` (how a broker is made to run it; empty for the others), ``follows`` (what
/// of Pulsar's code the simulation follows), ``manager`` (whether ``EntryCacheManager`` runs it)
/// ``reads_trace_twice`` (a replay's second pass, as Belady's) and ``release`` (the version a
/// broker running it reports; empty for the others).
#[pyfunction]
pub fn designs(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    crate::config::designs::DESIGNS
        .iter()
        .map(|d| {
            let out = PyDict::new(py);
            out.set_item("name", d.name)?;
            out.set_item("label", d.label)?;
            out.set_item("models", d.models)?;
            out.set_item("role", d.role.name())?;
            out.set_item("broker_settings", d.broker_settings)?;
            out.set_item("follows", d.follows)?;
            out.set_item("manager", d.manager)?;
            out.set_item("reads_trace_twice", d.reads_trace_twice)?;
            out.set_item("release", d.release)?;
            Ok(out)
        })
        .collect()
}

/// The settings of a broker.conf (a path, or a mapping of key -> value), as written: what
/// ``lc.workload.settings_from_broker_conf`` picks the traffic's keys from.
#[pyfunction]
pub fn read_broker_conf(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
) -> PyResult<Vec<(String, String)>> {
    conf_pairs(py, source)
}

/// The largest broker.conf read (Pulsar's own is about 90 KiB).
const MAX_BROKER_CONF_BYTES: u64 = 4 << 20;

/// `key=value` lines of a Java properties file (the broker.conf format); `#`/`!` start comments.
fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let cut = l.find(['=', ':'])?;
            Some((l[..cut].trim().to_string(), l[cut + 1..].trim().to_string()))
        })
        .collect()
}
