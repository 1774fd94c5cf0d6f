//! A plain HTTP/1.1 client for the web view's tests: a request written by hand (so a test
//! can send any Host, Origin or cookie), the response read whole, or a live stream read
//! until a pattern appears.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response: status, headers (names lowercase), body (de-chunked).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The web session cookie the reply sets (`name=value`).
    pub fn cookie(&self) -> Option<String> {
        let set = self.header("set-cookie")?;
        Some(set.split(';').next()?.trim().to_owned())
    }
}

/// A request to send: method, path, headers, form body.
#[derive(Debug, Clone, Default)]
pub struct Req {
    pub method: &'static str,
    pub path: String,
    pub host: Option<String>,
    pub headers: Vec<(String, String)>,
    pub form: Option<String>,
}

impl Req {
    pub fn get(path: &str) -> Self {
        Self { method: "GET", path: path.to_owned(), ..Default::default() }
    }

    pub fn post(path: &str, form: &[(&str, &str)]) -> Self {
        let mut body = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            body.append_pair(k, v);
        }
        Self { method: "POST", path: path.to_owned(), form: Some(body.finish()), ..Default::default() }
    }

    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    #[must_use]
    pub fn cookie(self, cookie: &str) -> Self {
        self.header("cookie", cookie)
    }

    #[must_use]
    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    fn bytes(&self, addr: SocketAddr) -> Vec<u8> {
        let host = self.host.clone().unwrap_or_else(|| addr.to_string());
        let mut out =
            format!("{} {} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n", self.method, self.path);
        for (k, v) in &self.headers {
            let _ = write!(out, "{k}: {v}\r\n");
        }
        if let Some(form) = &self.form {
            let _ = write!(
                out,
                "content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{form}",
                form.len()
            );
        } else {
            out.push_str("\r\n");
        }
        out.into_bytes()
    }
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Reply { status, headers, body }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || after.len() < n {
            out.push_str(after.get(..n.min(after.len())).unwrap_or(after));
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// Sends a request and reads the whole response.
pub async fn send(addr: SocketAddr, req: &Req) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&req.bytes(addr)).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await.unwrap().unwrap();
    parse(&raw)
}

/// Sends a request and reads what arrives until `until` is in it, the stream ends or `wait`
/// passes; returns the raw text read.
pub async fn read_until(addr: SocketAddr, req: &Req, until: &str, wait: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&req.bytes(addr)).await.unwrap();
    let mut raw = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
        }
        if String::from_utf8_lossy(&raw).contains(until) {
            break;
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// Signs in (with a token, or on an open hub without one) and returns the session cookie.
pub async fn sign_in(addr: SocketAddr, token: &str) -> String {
    let reply = send(addr, &Req::post("/signin", &[("token", token)])).await;
    assert_eq!(reply.status, 303, "sign-in refused: {reply:?}");
    reply.cookie().expect("a session cookie")
}

/// The CSRF token a page carries.
pub fn csrf_of(page: &str) -> String {
    let at = page.find("x-baton-csrf\": \"").expect("a page with a CSRF token") + 16;
    page[at..at + 32].to_owned()
}
