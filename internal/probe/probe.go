// Package probe asks whether a dev server is up, for /wait URL and a
// service's ready condition (package supervisor, which polls it).
//
// What it guarantees: a probe sends one GET, with no proxy, no
// keep-alive and no certificate check, follows no redirect, counts any
// HTTP response as an answer, and gives up after its timeout.
package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"
)

// URL returns a probe of u: any HTTP response counts, redirects are not
// followed, no proxy is used, and a certificate is not verified (a dev
// server's is typically self-signed, and nothing is sent but a GET). Each
// call of the probe gives up after timeout, or when ctx ends; on success
// it says what answered, with the status.
func URL(u string, timeout time.Duration) func(context.Context) (string, error) {
	client := &http.Client{
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       timeout,
	}
	return func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close() // Best effort: only the status counts.
		return fmt.Sprintf("%s answered %s", u, resp.Status), nil
	}
}
