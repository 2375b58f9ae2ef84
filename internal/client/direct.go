package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/flowcontrol"
)

// Deletes (issue 41): the collector's DELETE, one per collected object, sent on the cluster's
// HTTP client without client-go's request builder. Profiled under a background cascade of
// 10,000 objects, building a metadata client's DELETE (a Request with its backoff manager,
// retry state, URL template and path joins, a codec per call for the options, the response
// read into memory) was a fifth of cascade's CPU, as much as HTTP/2 and TLS writing it.
//
// What the request carries and how it is treated are the metadata client's: the same URL and
// JSON DeleteOptions body (its Accept asks for the answer as PartialObjectMetadata, protobuf
// first, as the metadata client's GET does: its DELETE takes the whole object, which no
// caller reads, so the API server encodes and sends less), the same
// HTTP client (its transport's authentication, user agent and cascade's own round trippers),
// the same client-side rate limiter, client-go's metrics hooks (rest_client_*), the same
// errors (a Status answer becomes its StatusError, so IsConflict and IsNotFound hold), and
// client-go's retries: a 429 or 5xx answer with Retry-After is sent again after that many
// seconds, at most maxDeleteRetries times; no other failure is retried (client-go retries
// connection errors for GETs only). Warning headers go to the config's warning handler, or
// are logged as client-go's default does.

// maxDeleteRetries is client-go's default maxRetries of a request.
const maxDeleteRetries = 10

// MetadataAccept is what the metadata client asks for: PartialObjectMetadata, in protobuf where
// the server has it, else JSON.
const MetadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// Deleter sends DELETEs of objects on a cluster's HTTP client.
type Deleter struct {
	base *url.URL // scheme, host and path prefix of the API server
	hc   *http.Client
	// userAgent is set on each request, as client-go's requests have it (the transport's
	// user-agent round tripper then leaves the request as it is instead of copying it).
	userAgent string
	limiter   flowcontrol.RateLimiter
	warnings  rest.WarningHandlerWithContext
	decoder   runtime.ClientNegotiator
}

// NewDeleter builds a Deleter on cfg and hc, the HTTP client the cluster's other clients use.
// cfg's RateLimiter, when set, is the one those clients share; with QPS > 0 and none set, the
// Deleter gets a limiter of its own, as a client built on cfg would.
func NewDeleter(cfg *rest.Config, hc *http.Client) (*Deleter, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	d := &Deleter{
		base:      base,
		hc:        hc,
		limiter:   cfg.RateLimiter,
		userAgent: cfg.UserAgent,
		decoder:   runtime.NewClientNegotiator(metainternalversionscheme.Codecs.WithoutConversion(), schema.GroupVersion{}),
	}
	if d.userAgent == "" {
		d.userAgent = rest.DefaultKubernetesUserAgent()
	}
	if d.limiter == nil && cfg.QPS > 0 {
		burst := cfg.Burst
		if burst < 1 {
			burst = rest.DefaultBurst
		}
		d.limiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	}
	switch {
	case cfg.WarningHandlerWithContext != nil:
		d.warnings = cfg.WarningHandlerWithContext
	case cfg.WarningHandler != nil:
		d.warnings = warningAdapter{cfg.WarningHandler}
	default:
		d.warnings = warningAdapter{rest.WarningLogger{}}
	}
	return d, nil
}

type warningAdapter struct{ h rest.WarningHandler }

func (w warningAdapter) HandleWarningHeaderWithContext(_ context.Context, code int, agent, text string) {
	w.h.HandleWarningHeader(code, agent, text)
}

// objectPath is the API path of one object: /api/v1/namespaces/NS/RESOURCE/NAME or
// /apis/GROUP/VERSION/..., unescaped (the URL escapes it). The API server refuses names with
// "/" or "%" and the names "." and "..", for every resource it stores, so each part is one
// segment, as in the metadata client's path.
func (d *Deleter) objectPath(gvr schema.GroupVersionResource, namespace, name string) string {
	var b strings.Builder
	b.Grow(len(d.base.Path) + 64 + len(namespace) + len(name))
	b.WriteString(strings.TrimSuffix(d.base.Path, "/"))
	if gvr.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(gvr.Group)
		b.WriteByte('/')
	}
	b.WriteString(gvr.Version)
	if namespace != "" {
		b.WriteString("/namespaces/")
		b.WriteString(namespace)
	}
	b.WriteByte('/')
	b.WriteString(gvr.Resource)
	b.WriteByte('/')
	b.WriteString(name)
	return b.String()
}

// deleteBody is DeleteOptions as the metadata client encodes them (kind and apiVersion set).
func deleteBody(opts metav1.DeleteOptions) ([]byte, error) {
	opts.TypeMeta = metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}
	return json.Marshal(&opts)
}

// Delete deletes one object with opts; its error is the metadata client's for the same answer.
func (d *Deleter) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if name == "" {
		return fmt.Errorf("name is required")
	}
	body, err := deleteBody(opts)
	if err != nil {
		return err
	}
	u := *d.base
	u.Path, u.RawPath = d.objectPath(gvr, namespace, name), ""
	target := u.String()
	for retries := 0; ; retries++ {
		if d.limiter != nil {
			start := time.Now()
			if err := d.limiter.Wait(ctx); err != nil {
				return err
			}
			clientmetrics.RateLimiterLatency.Observe(ctx, http.MethodDelete, u, time.Since(start))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = http.Header{
			"Accept":       {MetadataAccept},
			"Content-Type": {"application/json"},
			"User-Agent":   {d.userAgent},
		}
		start := time.Now()
		resp, err := d.hc.Do(req)
		clientmetrics.RequestLatency.Observe(ctx, http.MethodDelete, u, time.Since(start))
		if err != nil {
			clientmetrics.RequestResult.Increment(ctx, "<error>", http.MethodDelete, u.Host)
			return err
		}
		clientmetrics.RequestResult.Increment(ctx, strconv.Itoa(resp.StatusCode), http.MethodDelete, u.Host)
		d.warn(ctx, resp)
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			// The answer (the object's metadata) is not needed: drain it so that the stream
			// ends cleanly.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
			_ = resp.Body.Close()
			return nil
		}
		if wait, ok := retryAfter(resp); ok && retries < maxDeleteRetries {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
			_ = resp.Body.Close()
			clientmetrics.RequestRetry.IncrementRetry(ctx, strconv.Itoa(resp.StatusCode), http.MethodDelete, u.Host)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		err = ResponseError(d.decoder, resp, http.MethodDelete, gvr.GroupResource(), name)
		_ = resp.Body.Close()
		return err
	}
}

// maxAnswerBytes bounds what is read of an answer cascade does not use, or of an error's body.
const maxAnswerBytes = 1 << 20

// retryAfter is client-go's rule: a 429 or 5xx answer with a Retry-After of whole seconds.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return 0, false
	}
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

func (d *Deleter) warn(ctx context.Context, resp *http.Response) {
	h := resp.Header["Warning"]
	if len(h) == 0 {
		return
	}
	ws, _ := utilnet.ParseWarningHeaders(h)
	for _, w := range ws {
		d.warnings.HandleWarningHeaderWithContext(ctx, w.Code, w.Agent, w.Text)
	}
}

// ResponseError is the error of a non-2xx answer: its Status when the body holds one that
// failed, else a generic error of the code, as client-go makes them (so that IsNotFound,
// IsConflict and the like hold either way).
func ResponseError(neg runtime.ClientNegotiator, resp *http.Response, verb string, gr schema.GroupResource, name string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil {
		if dec, err := neg.Decoder(mediaType, params); err == nil {
			var status metav1.Status
			if _, _, err := dec.Decode(body, nil, &status); err == nil && status.Status == metav1.StatusFailure {
				return &apierrors.StatusError{ErrStatus: status}
			}
		}
	}
	retry := 0
	if s, ok := retryAfter(resp); ok {
		retry = int(s / time.Second)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, verb, gr, name, string(body), retry, true)
}

// NewDirect returns an Interface backed by the metadata client whose Delete goes through d.
func NewDirect(c metadata.Interface, d *Deleter) Interface {
	return directDeletes{metadataClient: metadataClient{client: c}, d: d}
}

type directDeletes struct {
	metadataClient
	d *Deleter
}

func (c directDeletes) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	return c.d.Delete(ctx, gvr, namespace, name, opts)
}
