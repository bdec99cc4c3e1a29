// `adopt-worker codec-server`: decodes payloads for the Temporal Web UI
// (its codec endpoint), with the codec key of temporal.codec_key_file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"adoption/codec"
	"adoption/config"
	"adoption/logging"
)

func codecServerCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	var listen, authFile string
	var origins []string
	cmd := &cobra.Command{
		Use:     "codec-server",
		Example: "  adopt-worker codec-server --config /etc/adoption/orchestrator.yaml",
		Short:   "Serve /decode and /encode for the Temporal Web UI with the codec key: decoded payloads, encrypted signal inputs",
		Long: `Serves the Web UI's codec endpoint: the browser posts a history's encrypted
payloads to /decode and gets them back decoded, and a signal's input typed into
its Signal dialog to /encode, so it reaches the workers encrypted (the input
holds the operator's signed intent: adopt sign). It reads only temporal.* of
the configuration (the key named by temporal.codec_key_file). Point the UI at
it: the dev server's --ui-codec-endpoint, or a cluster UI's codec.endpoint
setting (docs/access.md). Whoever reaches it reads every payload: it binds
loopback by default; with --authorization-file every request must carry
that file's content as its Authorization header.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*cfgPath, map[string]string{"node.name": "codec-server", "authority.unsigned": "true"})
			if err != nil {
				return err
			}
			if len(cfg.Temporal.Key) == 0 {
				return configError{fmt.Errorf("%s is not set in the configuration (--config %q or $ADOPT_CONFIG): the codec server has no key to decode with; set it to the key file the workers use", config.CodecKeyFileKey, *cfgPath)}
			}
			c, err := codec.New(cfg.Temporal.Key, cfg.Temporal.OlderKeys...)
			if err != nil {
				return err
			}
			o := codec.ServerOptions{Origins: origins}
			if authFile != "" {
				b, err := os.ReadFile(authFile)
				if err != nil {
					return fmt.Errorf("--authorization-file: %w", err)
				}
				if o.Authorization = strings.TrimSpace(string(b)); o.Authorization == "" {
					return fmt.Errorf("--authorization-file %s is empty; write the Authorization header value into it, e.g. Bearer <token>", authFile)
				}
			}
			log, err := logging.New(stderr, logOptions(cfg))
			if err != nil {
				return err
			}
			// It only displays: payloads in clear (written before the key was
			// set) are shown as they are, not refused.
			return serveCodec(ctx, listen, codec.Handler(c.Lenient(), o), log.With("key_id", c.KeyID()))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8234", "HOST:PORT to serve on (anyone who reaches it can read payloads)")
	cmd.Flags().StringSliceVar(&origins, "ui-origin", []string{"http://127.0.0.1:8233", "http://localhost:8233"}, "the Web UI's origins (scheme://host:port) the browser calls from")
	cmd.Flags().StringVar(&authFile, "authorization-file", "", "a file whose content every request's Authorization header must equal (e.g. Bearer <token>)")
	return cmd
}

// serveCodec serves h on listen until ctx ends.
func serveCodec(ctx context.Context, listen string, h http.Handler, log *slog.Logger) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("codec server --listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("codec server listening", "address", l.Addr().String())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
