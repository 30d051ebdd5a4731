// Command checkout is an example merchant shop that takes card payments
// in the browser with surgepay (docs/checkout.md): a product page, a pay
// page with surgepay's card frame, an order page built from surgepay's
// answer, and a webhook receiver. Orders are kept in memory: it is an
// example to copy from, not a shop to run. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4242", "the shop's address, host:port")
	api := flag.String("api", "http://127.0.0.1:8080", "surgepay's API base URL")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *api, log); err != nil {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(1)
	}
}

// run serves the shop on listen until SIGINT or SIGTERM.
func run(listen, api string, log *slog.Logger) error {
	shop, err := newShop(Config{API: api, SecretKey: os.Getenv("SHOP_SECRET_KEY"),
		PublishableKey: os.Getenv("SHOP_PUBLISHABLE_KEY"), WebhookSecret: os.Getenv("SHOP_WEBHOOK_SECRET"), Logger: log})
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: shop.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown) //nolint:errcheck // exiting
	}()
	log.Info("shop listening", "url", "http://"+listen, "api", api)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
