package oncehook_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The root package imports no store and no broker client (issue 42): a
// library user who wants only the Outbox, or only SQLite, builds none of
// the others; the binary gets them all from package kinds, the one place
// they register.
func TestTheRootPackageImportsNoStoreOrBrokerClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, client := range []string{
		"github.com/jackc/pgx/v5", "github.com/nats-io/nats.go", "github.com/rabbitmq/amqp091-go",
		"github.com/twmb/franz-go/pkg/kgo", "github.com/redis/go-redis/v9", "modernc.org/sqlite",
		"github.com/oncehook/oncehook/store/sqlite", "github.com/oncehook/oncehook/store/postgres",
		"github.com/oncehook/oncehook/store/redis", "github.com/oncehook/oncehook/broker/nats",
		"github.com/oncehook/oncehook/broker/amqp", "github.com/oncehook/oncehook/broker/kafka",
	} {
		for _, d := range deps {
			if d == client || strings.HasPrefix(d, client+"/") {
				t.Errorf("the root package depends on %s", d)
			}
		}
	}
}
