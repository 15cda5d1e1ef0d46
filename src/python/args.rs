//! Integer arguments whose range errors name the argument.
//!
//! PyO3 converts an `int` argument to the Rust type before the function runs; a value out of the
//! type's range is an `OverflowError` saying "Python int too large to convert to C long" or
//! "can't convert negative int to unsigned", which names nothing (PyO3 only adds a note). An
//! argument declared as [`Int`] takes any Python `int` (its `TypeError` for anything else is
//! PyO3's as before), and the body converts it with [`Int::get`], which raises
//! `InvalidArgumentError` (a `ValueError`) naming the argument and the range.

use super::errors::to_py;
use crate::error::Error;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;

/// A Python `int` argument, converted to its Rust type by [`Int::get`].
#[derive(Debug, Clone, Copy)]
pub struct Int(Value);

#[derive(Debug, Clone, Copy)]
enum Value {
    Fits(i128),
    /// Beyond `i128` (no Rust argument type holds it).
    Above,
    Below,
}

impl<'a, 'py> FromPyObject<'a, 'py> for Int {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i128>() {
            Ok(v) => Ok(Int(Value::Fits(v))),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                let negative = obj.lt(0)?;
                Ok(Int(if negative { Value::Below } else { Value::Above }))
            }
            Err(e) => Err(e),
        }
    }
}

/// The integer types arguments convert to, with their range.
pub trait IntArg: Sized + TryFrom<i128> {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl IntArg for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}

int_arg!(i32, i64, u16, u32, u64, usize);

impl Int {
    /// A default value.
    pub const fn of(v: i64) -> Int {
        Int(Value::Fits(v as i128))
    }

    /// The value as a `T`, or `InvalidArgumentError` naming `name` and `T`'s range.
    pub fn get<T: IntArg>(self, py: Python<'_>, name: &'static str) -> PyResult<T> {
        let v = self.within(py, name, T::MIN, T::MAX)?;
        T::try_from(v).map_err(|_| out_of_range(py, name, T::MIN, T::MAX, v.to_string()))
    }

    /// The value in `[0, i64::MAX]`, as a `u64`: a count or time that other code keeps in an
    /// `i64` too (a clock's nanoseconds).
    pub fn non_negative_i64(self, py: Python<'_>, name: &'static str) -> PyResult<u64> {
        let max = i128::from(i64::MAX);
        let v = self.within(py, name, 0, max)?;
        u64::try_from(v).map_err(|_| out_of_range(py, name, 0, max, v.to_string()))
    }

    /// The value if it is in `[min, max]`, or `InvalidArgumentError` naming `name` and the range.
    fn within(self, py: Python<'_>, name: &'static str, min: i128, max: i128) -> PyResult<i128> {
        match self.0 {
            Value::Fits(v) if (min..=max).contains(&v) => Ok(v),
            Value::Fits(v) => Err(out_of_range(py, name, min, max, v.to_string())),
            Value::Above => Err(out_of_range(py, name, min, max, "a larger int".into())),
            Value::Below => Err(out_of_range(py, name, min, max, "a smaller int".into())),
        }
    }
}

fn out_of_range(py: Python<'_>, name: &'static str, min: i128, max: i128, got: String) -> PyErr {
    to_py(
        py,
        Error::invalid(name, format!("must be in [{min}, {max}], got {got}")),
    )
}

/// [`Int::get`] of an optional argument.
pub fn get_opt<T: IntArg>(
    py: Python<'_>,
    value: Option<Int>,
    name: &'static str,
) -> PyResult<Option<T>> {
    value.map(|v| v.get(py, name)).transpose()
}
