//! A fake API server for unit tests: a `kube::Client` whose every request a closure answers
//! (status and JSON body, from the method and path), with the requests it got, in order.

use std::sync::Arc;

use parking_lot::Mutex;

/// One request the fake API server got: method and path with query.
pub type Request = (http::Method, String);

pub struct FakeApi {
    pub client: kube::Client,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeApi {
    /// A client answered by `answer(method, path)`.
    pub fn new(answer: impl Fn(&http::Method, &str) -> (u16, String) + Send + Sync + 'static) -> Self {
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let (seen, answer) = (requests.clone(), Arc::new(answer));
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let path = request.uri().path_and_query().map(ToString::to_string).unwrap_or_default();
            let (status, body) = answer(request.method(), &path);
            seen.lock().push((request.method().clone(), path));
            async move { http::Response::builder().status(status).body(kube::client::Body::from(body.into_bytes())) }
        });
        FakeApi { client: kube::Client::new(service, "default"), requests }
    }

    /// An API server that serves nothing: every request is answered 404.
    pub fn serving_nothing() -> Self {
        FakeApi::new(|_, _| (404, not_found()))
    }

    /// How many requests it got with `method` to a path starting with `prefix`.
    pub fn count(&self, method: &http::Method, prefix: &str) -> usize {
        self.requests.lock().iter().filter(|(m, path)| m == method && path.starts_with(prefix)).count()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().clone()
    }
}

/// The body of a 404.
pub fn not_found() -> String {
    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#.into()
}
