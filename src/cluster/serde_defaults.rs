//! The small functions the spec types' serde attributes name: a default of `true` or `1`, and
//! whether a value is its type's default (left out when written).

pub(super) fn yes() -> bool {
    true
}

pub(super) fn one() -> u32 {
    1
}

pub(super) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
