package oncehook_test

import (
	"os"
	"strings"
	"testing"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/alert/channel"
	"github.com/oncehook/oncehook/kinds"
)

// readmeYAML is each ```yaml block of the README that contains marker.
func readmeYAML(t *testing.T, marker string) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, part := range strings.Split(string(readme), "```yaml\n")[1:] {
		if block := part[:strings.Index(part, "```")]; strings.Contains(block, marker) {
			out = append(out, block)
		}
	}
	return out
}

// The README's alert channels and retry rules, as written, pass the
// config's whole check, and build the channels they say (#46).
func TestREADMEAlertChannelsAndRetryRulesParse(t *testing.T) {
	env := map[string]string{"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x", "TEAMS_WORKFLOW_URL": "https://example.logic.azure.com/workflows/x",
		"DISCORD_WEBHOOK_URL": "https://discord.com/api/webhooks/1/x", "ALERT_TOKEN": "t", "SMTP_PASSWORD": "p"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	blocks := readmeYAML(t, "  channels:")
	if len(blocks) != 1 {
		t.Fatalf("%d README blocks with alert channels, want 1", len(blocks))
	}
	cfg, err := oncehook.ParseConfig([]byte("store: sqlite://./x.db\nsources: [{name: o, outbox: true}]\n"+blocks[0]), lookup, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	chs, err := channel.FromConfig(cfg.Alerts, channel.Deps{})
	if err != nil || len(chs) != 5 {
		t.Fatalf("%d channels, %v; want the README's 5", len(chs), err)
	}
	var kindsSeen []string
	for _, c := range cfg.Alerts.Channels {
		kindsSeen = append(kindsSeen, c.Kind)
	}
	if strings.Join(kindsSeen, " ") != "slack teams discord json email" {
		t.Errorf("kinds %v", kindsSeen)
	}
	rules := readmeYAML(t, "final_on: [4xx]            #")
	if len(rules) != 1 {
		t.Fatalf("%d README blocks with retry rules, want 1", len(rules))
	}
	cfg, err = oncehook.ParseConfig([]byte("store: sqlite://./x.db\nsources: [{name: o, outbox: true, destinations: [crm, legacy]}]\n"+rules[0]), lookup, kinds.All())
	if err != nil {
		t.Fatal(err)
	}
	d := oncehook.DeliveryDestination(cfg.Destinations[0], nil, nil)
	if d.Statuses == nil {
		t.Fatal("the README's retry rules built none")
	}
}
