//! Closed sets of names (kinds, backends, dtypes) and the error for a name outside them.

/// A name given on a command line or in a file that is not one of the allowed spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} `{value}`: expected one of {}", .allowed.join(", "))]
pub struct UnknownName {
    /// What the name was meant to be (`kind`, `backend`, ...).
    pub field: &'static str,
    /// The name as given.
    pub value: String,
    /// Every accepted spelling.
    pub allowed: Vec<&'static str>,
}

/// Declares a serde enum with snake_case names, `Display`, `FromStr` and a list of all values,
/// so the four spellings of each name cannot drift apart. Exported for the tuner's own closed
/// sets of names; the caller's crate must depend on serde.
#[macro_export]
macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident, $field:literal { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The name used in JSON, on the command line and in tables.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::UnknownName {
                        field: $field,
                        value: s.to_string(),
                        allowed: Self::ALL.iter().map(|v| v.as_str()).collect(),
                    })
            }
        }
    };
}
