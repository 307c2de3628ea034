package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// Any response is an answer, a redirect is not followed, and a
// self-signed certificate is taken.
func TestURLAnswers(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/gone", http.StatusFound) })
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { t.Error("the probe followed a redirect") })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{"/moved": "answered 302 Found", "/broken": "answered 500 Internal Server Error"} {
		said, err := URL(srv.URL+path, time.Second)(context.Background())
		if err != nil || !strings.HasSuffix(said, want) || !strings.HasPrefix(said, srv.URL+path) {
			t.Errorf("probe of %s = %q, %v; want %q", path, said, err, want)
		}
	}
}

// Nothing listening, or a server that does not answer in time, is no
// answer.
func TestURLFails(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := "http://" + l.Addr().String() + "/" // accepts, never answers
	defer l.Close()
	// A port nothing listens on, outside the ephemeral range: one that a
	// listen on ":0" gave and that was closed may be given again to a
	// parallel test's server (httptest's listen on ":0"), which answers.
	refused := "http://127.0.0.1:" + strconv.Itoa(testloop.FreePort(t)) + "/"
	for _, u := range []string{silent, refused} {
		start := time.Now()
		if said, err := URL(u, 200*time.Millisecond)(context.Background()); err == nil {
			t.Errorf("probe of %s = %q, want an error", u, said)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("probe of %s took %s, past its timeout", u, took)
		}
	}
}
