// Command svc is the cutover tests' stand-in for a service people use: on
// first start it writes random data into each of its data directories (a
// named volume, an anonymous volume, a bind mount), and it serves their
// checksums over HTTP, so a test can tell from outside the container that the
// data survived a cutover. With -conf it plays a service reading its
// configuration file: it will not start without it, and answers GET /conf
// with its version and the file as it reads it at that request. With -dns
// it plays a resolver (dns.go). Built static (CGO_ENABLED=0) and imported into
// Docker as a one-file image: no base image, no registry.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	dirs := flag.String("data", "/named,/anon,/bind", "comma-separated data directories")
	fail := flag.String("fail", "", "exit: exit at once with status 3; nolisten: run but never listen")
	check := flag.String("check", "", "healthcheck mode: GET this URL and exit 0 on 200")
	conf := flag.String("conf", "", "a configuration file read at start (no start without it) and at every GET /conf")
	dns := flag.String("dns", "", "play a resolver instead: answer DNS on this address, UDP and TCP (dns.go)")
	flag.Parse()

	if *check != "" {
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(*check)
		if err != nil || resp.StatusCode != http.StatusOK {
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch *fail {
	case "exit":
		fmt.Fprintln(os.Stderr, "svc: told to fail (-fail=exit)")
		os.Exit(3)
	case "nolisten":
		fmt.Fprintln(os.Stderr, "svc: told never to listen (-fail=nolisten)")
		for {
			time.Sleep(time.Hour)
		}
	}

	if *dns != "" {
		if err := serveDNS(*dns, os.Getenv("SVC_VERSION")); err != nil {
			fmt.Fprintln(os.Stderr, "svc:", err)
			os.Exit(1)
		}
		return
	}
	var list []string
	for _, d := range strings.Split(*dirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			list = append(list, d)
		}
	}
	for _, d := range list {
		if err := seed(d); err != nil {
			fmt.Fprintln(os.Stderr, "svc:", err)
			os.Exit(1)
		}
	}

	version := os.Getenv("SVC_VERSION")
	if *conf != "" {
		if _, err := os.ReadFile(*conf); err != nil {
			fmt.Fprintln(os.Stderr, "svc: configuration:", err)
			os.Exit(1)
		}
		http.HandleFunc("/conf", func(w http.ResponseWriter, _ *http.Request) {
			b, err := os.ReadFile(*conf)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, "%s %s", version, b)
		})
	}
	http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	http.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, version) })
	http.HandleFunc("/sums", func(w http.ResponseWriter, _ *http.Request) {
		sums := map[string]string{}
		for _, d := range list {
			b, err := os.ReadFile(filepath.Join(d, "data"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			s := sha256.Sum256(b)
			sums[d] = hex.EncodeToString(s[:])
		}
		_ = json.NewEncoder(w).Encode(sums)
	})
	fmt.Fprintf(os.Stderr, "svc %s: serving on %s\n", version, *listen)
	// Stopped as a service people use stops: SIGTERM closes the listener
	// and lets the requests under way finish (docker stop sends it).
	srv := &http.Server{Addr: *listen}
	stopped := make(chan struct{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		close(stopped)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "svc:", err)
		os.Exit(1)
	}
	<-stopped
}

// seed writes 64 KiB of random data into dir/data unless it is already there:
// a successor must find its predecessor's data, never write its own.
func seed(dir string) error {
	p := filepath.Join(dir, "data")
	if _, err := os.Stat(p); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	b := make([]byte, 64<<10)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}
