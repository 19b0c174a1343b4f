//! Bounds on what a member answers. A member's API server is another team's, or wherever a
//! kubeconfig points, and kube-client reads a list page or an error body whole and splits a
//! watch into lines of any length: without bounds one answer could take the memory of every
//! replica. So every member client's service is wrapped in [`Answers`], a tower layer that
//! counts a response body's bytes as they arrive (each watch line's, for a watch), and puts a
//! deadline on every request (whole, for a watch: on each line). An answer over a bound fails
//! its request with an error naming the bound; the member counts as unreachable for a while
//! ([`Answers::unreachable`]), which the plugins' status says, and the request is retried as
//! any failed one is (a watch by its backoff, an admission at the next round).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use kube::client::Body as RequestBody;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tokio::time::{Instant, Sleep};
use tower::BoxError;

use crate::excerpt::excerpt;
use crate::metrics::Metrics;

/// How long a member's watch may go without a whole line: past the 290 s after which the API
/// server ends a watch kube-runtime opens, so that a quiet watch ends before it.
pub const WATCH_IDLE: Duration = Duration::from_secs(330);
/// How long a refused answer marks its member unreachable: past the longest wait between a
/// failed watch's retries (kube-runtime's backoff stops growing at 30 s), so a member that
/// keeps answering wrong stays marked, and one that stopped is unmarked soon after.
const MARKED: Duration = Duration::from_secs(120);
/// The most of a refusal's text kept for the status.
const REASON_BYTES: usize = 512;

/// How much of a member's answers the host reads (`--member-max-body`, `--member-max-watch-line`).
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub max_body: u64,
    pub max_watch_line: u64,
}

impl Caps {
    /// These caps, with `deadline` on every request but a watch.
    pub fn within(self, deadline: Duration) -> Limits {
        Limits { caps: self, deadline, watch_idle: WATCH_IDLE }
    }
}

/// How much of a member's answers the host reads, and how long it waits for them.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub caps: Caps,
    /// The deadline of a request other than a watch, its whole body read.
    pub deadline: Duration,
    /// The longest a watch may go without a whole line.
    pub watch_idle: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("cluster {cluster:?} answered more than the {max}-byte cap on a response body (--member-max-body)")]
    Body { cluster: String, max: u64 },
    #[error("cluster {cluster:?} sent a watch line longer than the {max}-byte cap (--member-max-watch-line)")]
    WatchLine { cluster: String, max: u64 },
    #[error("cluster {cluster:?} did not answer whole within {wait:?} (--request-timeout)")]
    Deadline { cluster: String, wait: Duration },
    #[error("cluster {cluster:?} sent no whole watch line for {wait:?}")]
    Idle { cluster: String, wait: Duration },
}

/// The layer bounding one member's answers, and what it refused lately. Cloned into every
/// client of the member.
#[derive(Clone)]
pub struct Answers(Arc<Shared>);

struct Shared {
    cluster: String,
    limits: Limits,
    /// `kubewasm_member_answers_refused_total` by reason: body, watch-line, deadline, idle.
    refused: [Counter; 4],
    /// The last refusal and when.
    last: Mutex<Option<(Instant, String)>>,
}

impl Answers {
    pub fn new(cluster: &str, limits: Limits, metrics: &Metrics) -> Self {
        let refused = ["body", "watch-line", "deadline", "idle"].map(|reason| metrics.member_answers_refused(cluster, reason));
        Answers(Arc::new(Shared { cluster: cluster.to_string(), limits, refused, last: Mutex::new(None) }))
    }

    /// Why the member counts as unreachable: an answer of it refused in the last two minutes.
    pub fn unreachable(&self) -> Option<String> {
        let last = self.0.last.lock();
        last.as_ref().filter(|(at, _)| at.elapsed() < MARKED).map(|(_, why)| why.clone())
    }

    /// Counts and remembers a refusal; the error its request fails with.
    fn refuse(&self, error: AnswerError) -> BoxError {
        let counter = match error {
            AnswerError::Body { .. } => 0,
            AnswerError::WatchLine { .. } => 1,
            AnswerError::Deadline { .. } => 2,
            AnswerError::Idle { .. } => 3,
        };
        self.0.refused[counter].inc();
        let why = excerpt(&error.to_string(), REASON_BYTES).into_owned();
        tracing::warn!(cluster = %self.0.cluster, "refused an answer, the member counts as unreachable: {why}");
        *self.0.last.lock() = Some((Instant::now(), why));
        Box::new(error)
    }
}

impl<S> tower::Layer<S> for Answers {
    type Service = Bounded<S>;

    fn layer(&self, inner: S) -> Bounded<S> {
        Bounded { inner, answers: self.clone() }
    }
}

/// A member client's service with its answers bounded.
#[derive(Clone)]
pub struct Bounded<S> {
    inner: S,
    answers: Answers,
}

/// Whether a request is a watch (kube-client asks `watch=true`).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

impl<S, B> tower::Service<Request<RequestBody>> for Bounded<S>
where
    S: tower::Service<Request<RequestBody>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody<B>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let limits = self.answers.0.limits;
        let (cap, wait) = match is_watch(request.uri()) {
            true => (Cap::Line(limits.caps.max_watch_line), limits.watch_idle),
            false => (Cap::Body(limits.caps.max_body), limits.deadline),
        };
        let deadline = Instant::now() + wait;
        let call = self.inner.call(request);
        let answers = self.answers.clone();
        Box::pin(async move {
            let response = match tokio::time::timeout_at(deadline, call).await {
                Ok(response) => response.map_err(Into::into)?,
                Err(_) => return Err(answers.refuse(cap.late(&answers.0.cluster, wait))),
            };
            Ok(response.map(|inner| BoundedBody { inner, cap, seen: 0, wait, deadline: Box::pin(tokio::time::sleep_until(deadline)), answers, failed: false }))
        })
    }
}

/// What a body is bounded by.
#[derive(Debug, Clone, Copy)]
enum Cap {
    /// All of it.
    Body(u64),
    /// Each line (bytes since the last newline): a watch.
    Line(u64),
}

impl Cap {
    fn late(self, cluster: &str, wait: Duration) -> AnswerError {
        let cluster = cluster.to_string();
        match self {
            Cap::Body(_) => AnswerError::Deadline { cluster, wait },
            Cap::Line(_) => AnswerError::Idle { cluster, wait },
        }
    }
}

/// A member's response body, counted as it arrives.
pub struct BoundedBody<B> {
    inner: B,
    cap: Cap,
    /// Bytes of the body, or of the current line.
    seen: u64,
    /// The request's deadline, or a watch's idle time (each whole line starts it again).
    wait: Duration,
    deadline: Pin<Box<Sleep>>,
    answers: Answers,
    /// Refused: it ends.
    failed: bool,
}

impl<B> BoundedBody<B> {
    /// Counts `data`; the bound it passes, if any.
    fn count(&mut self, data: &[u8]) -> Result<(), AnswerError> {
        let cluster = || self.answers.0.cluster.clone();
        match self.cap {
            Cap::Body(max) => {
                self.seen += data.len() as u64;
                if self.seen > max {
                    return Err(AnswerError::Body { cluster: cluster(), max });
                }
            }
            Cap::Line(max) => {
                let mut lines = data.split(|&b| b == b'\n');
                // The first piece goes on with the line before; each piece after starts a line.
                self.seen += lines.next().map_or(0, <[u8]>::len) as u64;
                for line in lines {
                    if self.seen > max {
                        break;
                    }
                    self.deadline.as_mut().reset(Instant::now() + self.wait);
                    self.seen = line.len() as u64;
                }
                if self.seen > max {
                    return Err(AnswerError::WatchLine { cluster: cluster(), max });
                }
            }
        }
        Ok(())
    }

    fn fail(&mut self, error: AnswerError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.failed = true;
        Poll::Ready(Some(Err(self.answers.refuse(error))))
    }
}

impl<B> Body for BoundedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            let late = this.cap.late(&this.answers.0.cluster, this.wait);
            return this.fail(late);
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref()
            && let Err(e) = this.count(data)
        {
            return this.fail(e);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tower::Layer;

    const LIMITS: Limits =
        Limits { caps: Caps { max_body: 1 << 20, max_watch_line: 64 << 10 }, deadline: Duration::from_secs(30), watch_idle: Duration::from_secs(60) };

    type Chunks = futures::stream::BoxStream<'static, Result<Frame<Bytes>, std::convert::Infallible>>;

    /// A client of a member whose every answer is 200 with the body `body` streams, bounded.
    fn member(body: impl Fn() -> Chunks + Send + Sync + 'static) -> (kube::Client, Answers, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        let answers = Answers::new("m1", LIMITS, &metrics);
        let body = Arc::new(body);
        let service = tower::service_fn(move |_: Request<RequestBody>| {
            let body = http_body_util::StreamBody::new(body());
            async move { Ok::<_, std::convert::Infallible>(Response::new(body)) }
        });
        (kube::Client::new(answers.layer(service), "default"), answers, metrics)
    }

    fn chunks(chunks: Vec<Vec<u8>>) -> Chunks {
        futures::stream::iter(chunks.into_iter().map(|c| Ok(Frame::data(Bytes::from(c))))).boxed()
    }

    /// Endless `piece`s.
    fn endless(piece: &'static [u8]) -> Chunks {
        futures::stream::repeat_with(move || Ok(Frame::data(Bytes::from_static(piece)))).boxed()
    }

    fn get(path: &str) -> Request<Vec<u8>> {
        Request::get(path).body(Vec::new()).unwrap()
    }

    fn refused(metrics: &Metrics, reason: &str) -> u64 {
        metrics.member_answers_refused("m1", reason).get()
    }

    #[tokio::test]
    async fn an_endless_body_is_refused_at_the_cap_and_marks_the_member() {
        let (client, answers, metrics) = member(|| endless(&[b'x'; 8192]));
        let e = client.request_text(get("/api/v1/configmaps")).await.unwrap_err().to_string();
        assert!(e.contains("more than the 1048576-byte cap on a response body (--member-max-body)"), "{e}");
        assert!(answers.unreachable().is_some_and(|why| why.contains("--member-max-body")));
        assert_eq!(refused(&metrics, "body"), 1);
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole() {
        let (client, answers, _) = member(|| chunks(vec![b"{\"a\":".to_vec(), vec![b'1'; 1000], b"}".to_vec()]));
        let text = client.request_text(get("/api/v1/configmaps")).await.unwrap();
        assert_eq!(text.len(), 1006);
        assert!(answers.unreachable().is_none());
    }

    #[tokio::test]
    async fn a_watch_line_is_capped_but_not_the_whole_watch() {
        // Many short lines, far more than the body cap in all: a watch, so only lines count.
        let event = b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"}}}\n";
        let many = (2 << 20) / event.len() + 1;
        let (client, answers, _) = member(move || chunks(vec![event.to_vec(); many]));
        let body = client.send(get("/api/v1/configmaps?watch=true").map(RequestBody::from)).await.unwrap().into_body();
        let read = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes();
        assert_eq!(read.len(), event.len() * many);
        assert!(answers.unreachable().is_none());

        // A line that never ends is refused at the line cap, however it is cut into chunks.
        let (client, answers, metrics) = member(|| {
            let start = futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"{\"type\":\"ADDED\"}\n{\"type\":")))]);
            start.chain(endless(&[b'x'; 1000])).boxed()
        });
        let body = client.send(get("/api/v1/configmaps?watch=true").map(RequestBody::from)).await.unwrap().into_body();
        let e = http_body_util::BodyExt::collect(body).await.unwrap_err().to_string();
        assert!(e.contains("watch line longer than the 65536-byte cap (--member-max-watch-line)"), "{e}");
        assert!(answers.unreachable().is_some());
        assert_eq!((refused(&metrics, "watch-line"), refused(&metrics, "body")), (1, 0));
    }

    #[tokio::test]
    async fn a_line_longer_than_the_cap_inside_one_chunk_is_refused() {
        let (client, _, _) = member(|| {
            let mut chunk = vec![b'x'; 100 << 10];
            chunk.push(b'\n');
            chunks(vec![chunk])
        });
        let body = client.send(get("/apis/x/v1/things?watch=1").map(RequestBody::from)).await.unwrap().into_body();
        let e = http_body_util::BodyExt::collect(body).await.unwrap_err().to_string();
        assert!(e.contains("--member-max-watch-line"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_midway_fails_at_the_deadline() {
        let (client, answers, metrics) = member(|| chunks(vec![b"{\"items\":[".to_vec()]).chain(futures::stream::pending()).boxed());
        let started = Instant::now();
        let e = client.request_text(get("/api/v1/configmaps")).await.unwrap_err().to_string();
        assert!(e.contains("did not answer whole within 30s"), "{e}");
        assert_eq!(started.elapsed(), LIMITS.deadline);
        assert!(answers.unreachable().is_some());
        assert_eq!(refused(&metrics, "deadline"), 1);
        // Marked for a while, then no longer.
        tokio::time::advance(MARKED).await;
        assert!(answers.unreachable().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_fails_when_no_line_ends_within_its_idle_time() {
        // A line every 50 s keeps it open past the idle time; then a line that never ends.
        let (client, _, metrics) = member(|| {
            let lines = futures::stream::iter(0..3).then(|_| async {
                tokio::time::sleep(Duration::from_secs(50)).await;
                Ok(Frame::data(Bytes::from_static(b"{}\n{")))
            });
            lines.chain(futures::stream::pending()).boxed()
        });
        let started = Instant::now();
        let body = client.send(get("/api/v1/configmaps?watch=true").map(RequestBody::from)).await.unwrap().into_body();
        let e = http_body_util::BodyExt::collect(body).await.unwrap_err().to_string();
        assert!(e.contains("sent no whole watch line for 60s"), "{e}");
        assert_eq!(started.elapsed(), Duration::from_secs(150 + 60));
        assert_eq!(refused(&metrics, "idle"), 1);
    }
}
