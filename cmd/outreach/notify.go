package main

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/rs/zerolog"

	"outreach/delivery"
	"outreach/slackmsg"
)

// deliveryConfig reads Slack and webhook settings from the environment.
// Tokens, webhook URLs and the secret are never logged: only which are set.
func deliveryConfig(log zerolog.Logger) (delivery.Config, error) {
	var cfg delivery.Config
	sc := slackmsg.Config{
		BotToken:   os.Getenv("OUTREACH_SLACK_BOT_TOKEN"),
		Channel:    os.Getenv("OUTREACH_SLACK_CHANNEL"),
		WebhookURL: os.Getenv("OUTREACH_SLACK_WEBHOOK_URL"),
		APIURL:     os.Getenv("OUTREACH_SLACK_API_URL"),
	}
	for name, v := range map[string]string{"OUTREACH_SLACK_WEBHOOK_URL": sc.WebhookURL, "OUTREACH_SLACK_API_URL": sc.APIURL, "OUTREACH_WEBHOOK_URL": os.Getenv("OUTREACH_WEBHOOK_URL")} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("%s: want an absolute http(s) URL", name)
		}
	}
	if sc.BotToken != "" && sc.Channel == "" {
		return cfg, fmt.Errorf("OUTREACH_SLACK_BOT_TOKEN is set without OUTREACH_SLACK_CHANNEL: name the team's channel")
	}
	cfg.Slack = slackmsg.New(sc)
	cfg.WebhookURL = os.Getenv("OUTREACH_WEBHOOK_URL")
	cfg.WebhookSecret = os.Getenv("OUTREACH_WEBHOOK_SECRET")
	if cfg.WebhookURL != "" && cfg.WebhookSecret == "" {
		return cfg, fmt.Errorf("OUTREACH_WEBHOOK_URL is set without OUTREACH_WEBHOOK_SECRET: webhooks are always signed")
	}
	for name, d := range map[string]*time.Duration{"OUTREACH_DELIVERY_INTERVAL": &cfg.Interval, "OUTREACH_DELIVERY_BACKOFF": &cfg.BackoffBase,
		"OUTREACH_DELIVERY_BACKOFF_MAX": &cfg.BackoffMax, "OUTREACH_DELIVERY_LEASE": &cfg.Lease, "OUTREACH_WEBHOOK_TIMEOUT": &cfg.Timeout} {
		if v := os.Getenv(name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < time.Millisecond {
				return cfg, fmt.Errorf("%s=%q: want a duration such as 2s", name, v)
			}
			*d = x
		}
	}
	cfg.Logger = log
	log.Info().Str("slack", cfg.Slack.Mode()).Bool("webhook", cfg.WebhookURL != "").Msg("notification delivery configured")
	return cfg, nil
}
