//! Sending requests: authentication headers, retries with backoff on 5xx and connection
//! failures, and logging in again on 401 in session mode.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde_json::{Value, json};

use super::config::{AuthMode, Secret};
use super::{Inner, RedfishError};

/// A live login session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    token: Secret,
    /// The session resource, deleted on logout.
    location: Option<String>,
}

/// A BMC's answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

fn sensitive(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

impl Inner {
    /// Removes the password from text a BMC sent back, in case it echoes request bodies.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let password = self.credentials.password();
        if password.is_empty() {
            text.to_owned()
        } else {
            text.replace(password, "<redacted>")
        }
    }

    /// A short summary of a Redfish error body (see [`summarize_error`]), without the password.
    pub(crate) fn error_detail(&self, body: &[u8]) -> String {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return String::new();
        };
        self.scrub(&summarize_error(&value))
    }

    fn status_error(&self, method: &Method, path: &str, reply: &Reply) -> RedfishError {
        RedfishError::Status {
            host: self.host.clone(),
            method: method.to_string(),
            path: path.to_owned(),
            status: reply.status.as_u16(),
            detail: self.error_detail(&reply.body),
        }
    }

    /// `path` as a URL on this BMC. A BMC's answers name paths (service root links, session and
    /// task locations); one that names another scheme, host or port is refused, so that no
    /// request carrying the password or a session token leaves the BMC.
    pub(crate) fn on_the_bmc(&self, path: &str) -> Result<reqwest::Url, RedfishError> {
        let url = self
            .base
            .join(path)
            .map_err(|e| RedfishError::BadResponse {
                host: self.host.clone(),
                path: path.to_owned(),
                reason: format!("not a usable path: {e}"),
            })?;
        if url.origin() != self.base.origin() {
            return Err(RedfishError::NotOnTheBmc {
                host: self.host.clone(),
                path: path.to_owned(),
            });
        }
        Ok(url)
    }

    /// Sends one request with retries on 5xx and connection failures. Any other status returns.
    async fn send_retrying(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Reply, RedfishError> {
        let url = self.on_the_bmc(path)?;
        let attempts = self.options.retry.attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .header(http::header::ACCEPT, "application/json")
                .header("OData-Version", "4.0");
            for (name, value) in headers {
                request = request.header(name.clone(), value.clone());
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let outcome = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    response.bytes().await.map(|body| Reply {
                        status,
                        headers,
                        body,
                    })
                }
                Err(err) => Err(err),
            };
            let wait = match outcome {
                Ok(reply) if reply.status.is_server_error() && attempt < attempts => {
                    let retry_after = reply
                        .headers
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let backoff = self.options.retry.backoff(attempt);
                    let wait = retry_after
                        .map_or(backoff, |after| after.max(backoff))
                        .min(self.options.retry.max_backoff);
                    tracing::warn!(bmc = %self.host, %method, path, status = reply.status.as_u16(), attempt, "BMC error; retrying");
                    wait
                }
                Ok(reply) => {
                    tracing::debug!(bmc = %self.host, %method, path, status = reply.status.as_u16(), "redfish request");
                    return Ok(reply);
                }
                Err(err)
                    if attempt < attempts
                        && (err.is_connect() || err.is_timeout() || err.is_request()) =>
                {
                    tracing::warn!(bmc = %self.host, %method, path, attempt, error = %err, "BMC unreachable; retrying");
                    self.options.retry.backoff(attempt)
                }
                Err(source) => {
                    return Err(RedfishError::Transport {
                        host: self.host.clone(),
                        method: method.to_string(),
                        path: path.to_owned(),
                        attempts: attempt,
                        source: source.without_url(),
                    });
                }
            };
            self.clock.sleep(wait).await;
        }
    }

    /// The session token, logging in first if there is none.
    async fn token(&self) -> Result<Secret, RedfishError> {
        let mut session = self.session.lock().await;
        if let Some(live) = session.as_ref() {
            return Ok(live.token.clone());
        }
        let fresh = self.login().await?;
        let token = fresh.token.clone();
        *session = Some(fresh);
        Ok(token)
    }

    async fn login(&self) -> Result<Session, RedfishError> {
        let body = json!({"UserName": self.credentials.username(), "Password": self.credentials.password()});
        let path = self.sessions_path.clone();
        let reply = self
            .send_retrying(&Method::POST, &path, Some(&body), &[])
            .await?;
        if reply.status == StatusCode::UNAUTHORIZED || reply.status == StatusCode::FORBIDDEN {
            return Err(self.unauthorized(&Method::POST, &path));
        }
        if !reply.status.is_success() {
            return Err(self.status_error(&Method::POST, &path, &reply));
        }
        let token = reply
            .headers
            .get("x-auth-token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| RedfishError::BadResponse {
                host: self.host.clone(),
                path: path.clone(),
                reason: "the session answer has no X-Auth-Token".to_owned(),
            })?;
        let location = reply
            .headers
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        tracing::debug!(bmc = %self.host, "logged in");
        Ok(Session {
            token: Secret::new(token.to_owned()),
            location,
        })
    }

    pub(crate) async fn logout(&self) -> Result<(), RedfishError> {
        let Some(session) = self.session.lock().await.take() else {
            return Ok(());
        };
        let Some(location) = session.location else {
            return Ok(());
        };
        let headers: Vec<(HeaderName, HeaderValue)> = sensitive(session.token.expose())
            .map(|v| (HeaderName::from_static("x-auth-token"), v))
            .into_iter()
            .collect();
        let path = self
            .base
            .join(&location)
            .map(|u| u.path().to_owned())
            .unwrap_or(location);
        let reply = self
            .send_retrying(&Method::DELETE, &path, None, &headers)
            .await?;
        if reply.status.is_success()
            || reply.status == StatusCode::NOT_FOUND
            || reply.status == StatusCode::UNAUTHORIZED
        {
            Ok(())
        } else {
            Err(self.status_error(&Method::DELETE, &path, &reply))
        }
    }

    fn unauthorized(&self, method: &Method, path: &str) -> RedfishError {
        RedfishError::Unauthorized {
            host: self.host.clone(),
            user: self.credentials.username().to_owned(),
            method: method.to_string(),
            path: path.to_owned(),
        }
    }

    /// An authenticated request. In session mode a 401 drops the session, logs in again and
    /// repeats the request once.
    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<Reply, RedfishError> {
        let mut logged_in_again = false;
        loop {
            let mut headers = Vec::new();
            if let Some(tag) = if_match.and_then(|t| HeaderValue::from_str(t).ok()) {
                headers.push((http::header::IF_MATCH, tag));
            }
            let auth = match self.options.auth {
                AuthMode::Basic => {
                    let pair = format!(
                        "{}:{}",
                        self.credentials.username(),
                        self.credentials.password()
                    );
                    sensitive(&format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(pair)
                    ))
                    .map(|v| (http::header::AUTHORIZATION, v))
                }
                AuthMode::Session => sensitive(self.token().await?.expose())
                    .map(|v| (HeaderName::from_static("x-auth-token"), v)),
            };
            headers.extend(auth);
            let reply = self.send_retrying(&method, path, body, &headers).await?;
            if reply.status != StatusCode::UNAUTHORIZED {
                return Ok(reply);
            }
            if self.options.auth == AuthMode::Session && !logged_in_again {
                tracing::info!(bmc = %self.host, path, "session no longer valid; logging in again");
                *self.session.lock().await = None;
                logged_in_again = true;
                continue;
            }
            return Err(self.unauthorized(&method, path));
        }
    }

    /// The JSON body of a successful reply, or the error the reply stands for.
    pub(crate) fn json_of(
        &self,
        path: &str,
        method: &str,
        reply: Reply,
    ) -> Result<Value, RedfishError> {
        if !reply.status.is_success() {
            let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
            return Err(self.status_error(&method, path, &reply));
        }
        serde_json::from_slice(&reply.body).map_err(|e| RedfishError::BadResponse {
            host: self.host.clone(),
            path: path.to_owned(),
            reason: format!("invalid JSON: {e}"),
        })
    }

    /// `GET` with credentials, as JSON.
    pub(crate) async fn get_json(&self, path: &str) -> Result<Value, RedfishError> {
        let reply = self.request(Method::GET, path, None, None).await?;
        self.json_of(path, "GET", reply)
    }

    /// `GET` without credentials (the service root), as JSON.
    pub(crate) async fn get_json_open(&self, path: &str) -> Result<Value, RedfishError> {
        let reply = self.send_retrying(&Method::GET, path, None, &[]).await?;
        self.json_of(path, "GET", reply)
    }

    /// The error for a non-success reply (for callers that handle some statuses themselves).
    pub(crate) fn reply_error(&self, method: &Method, path: &str, reply: &Reply) -> RedfishError {
        self.status_error(method, path, reply)
    }
}

/// Message ids and messages of a Redfish error body: `Id: Message` per extended info entry that
/// has a message; when none has one (sushy-tools sends ids only), `code: message` of the error
/// itself, so the BMC's explanation is never lost.
pub(crate) fn summarize_error(value: &Value) -> String {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let infos = value
        .pointer("/error/@Message.ExtendedInfo")
        .and_then(Value::as_array);
    let parts: Vec<String> = infos
        .into_iter()
        .flatten()
        .filter(|info| !text(info, "Message").is_empty())
        .map(|info| format!("{}: {}", text(info, "MessageId"), text(info, "Message")))
        .collect();
    if !parts.is_empty() {
        return parts.join("; ");
    }
    let error = value.get("error").unwrap_or(&Value::Null);
    match (text(error, "code"), text(error, "message")) {
        (_, message) if message.is_empty() => String::new(),
        (code, message) if code.is_empty() => message,
        (code, message) => format!("{code}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::summarize_error;

    #[test]
    fn error_bodies_keep_the_bmc_explanation() {
        let extended = json!({"error": {"code": "Base.1.0.GeneralError", "message": "see ExtendedInfo",
            "@Message.ExtendedInfo": [{"MessageId": "Base.1.8.PropertyValueNotInList", "Message": "The value Reboot is not allowed."}]}});
        assert_eq!(
            summarize_error(&extended),
            "Base.1.8.PropertyValueNotInList: The value Reboot is not allowed."
        );
        // sushy-tools: extended info with ids only; the message is on the error itself.
        let sushy = json!({"error": {"code": "Base.1.0.GeneralError", "message": "Target libvirt device Pxe does not exist",
            "@Message.ExtendedInfo": [{"MessageId": "Base.1.0.GeneralError"}]}});
        assert_eq!(
            summarize_error(&sushy),
            "Base.1.0.GeneralError: Target libvirt device Pxe does not exist"
        );
        assert_eq!(
            summarize_error(&json!({"error": {"message": "busy"}})),
            "busy"
        );
        assert_eq!(summarize_error(&json!({"unrelated": 1})), "");
    }
}
