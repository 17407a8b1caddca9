//! An error and its sources as one line, for logs, panics and error messages printed once.

use std::error::Error;

/// `error` followed by each of its sources, separated by `": "`: `a: b: c`.
///
/// Error messages in Rackproof never repeat their source (STYLE.md, "One error-message style"),
/// so this is the one place the whole story is told.
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    #[derive(Debug)]
    struct Layer {
        message: &'static str,
        source: Option<Box<Layer>>,
    }

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.message)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.source.as_deref().map(|s| s as &(dyn Error + 'static))
        }
    }

    fn layers(messages: &[&'static str]) -> Layer {
        let mut messages = messages.iter().rev();
        let mut error = Layer {
            message: messages.next().expect("at least one message"),
            source: None,
        };
        for message in messages {
            error = Layer {
                message,
                source: Some(Box::new(error)),
            };
        }
        error
    }

    #[test]
    fn an_error_without_sources_is_its_message() {
        assert_eq!(error_chain(&layers(&["connect to bmc"])), "connect to bmc");
    }

    #[test]
    fn each_source_follows_after_a_colon_outermost_first() {
        let error = layers(&["node sim-1", "connect to bmc", "connection refused"]);
        assert_eq!(
            error_chain(&error),
            "node sim-1: connect to bmc: connection refused"
        );
    }

    #[test]
    fn a_boxed_error_with_a_static_lifetime_is_accepted() {
        let error: Box<dyn Error + 'static> = Box::new(layers(&["a", "b"]));
        assert_eq!(error_chain(error.as_ref()), "a: b");
    }
}
