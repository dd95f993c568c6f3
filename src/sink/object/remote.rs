//! Errors of the object store as the library reports them: the object's
//! URL, what was being done, and the server's answer (the whole chain of
//! causes: "connection refused" sits at its end).

use crate::error::Error;

/// The error for `e`, raised while doing `what` to `url`.
pub fn error(what: &'static str, url: &str, e: object_store::Error) -> Error {
    let typed = matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    );
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    // Listings report every status as a generic error: the status in the
    // answer tells refused credentials apart.
    let denied = typed
        || message.contains("status code: 403 Forbidden")
        || message.contains("status code: 401 Unauthorized");
    let (what, url) = (what, url.to_string());
    if denied {
        Error::AccessDenied { what, url, message }
    } else {
        Error::ObjectStore { what, url, message }
    }
}
