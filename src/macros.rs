//! `closed_set!`: an enum of names from a fixed set, with its one spelling.
//!
//! Every closed set of the report (classifications, phases, frameworks,
//! statistics, units, ...) is an enum declared with this macro: each
//! variant's name is written once and used for serialization, `as_str`,
//! `Display` and `parse`, so the JSON, the text and the code cannot drift,
//! and code compares variants, never formatted text.

/// Declares `pub enum $name` whose variants are named by string literals.
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The name, as written in every output.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )*
                }
            }

            /// The value of a name.
            #[allow(dead_code)]
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $( $text => Some($name::$variant), )*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

/// Implements `Deserialize` for structs derived with
/// `#[serde(remote = "Self")]` so that only a JSON object is accepted:
/// serde's derive also reads an array of the fields in declaration order,
/// which no AIPerf artifact writes, so `[1, 2]` in place of a sample would
/// silently become one.
macro_rules! objects_only {
    ($($t:ty),* $(,)?) => {$(
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Object;
                impl<'de> serde::de::Visitor<'de> for Object {
                    type Value = $t;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        map: A,
                    ) -> Result<$t, A::Error> {
                        <$t>::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                d.deserialize_map(Object)
            }
        }
    )*};
}
