package core

import (
	"testing"

	"github.com/tokentriage/tokentriage/shared/pluginconf"
)

// TestHeartbeatIsTheFiltersFigure: the filter's plugin configuration
// bounds sync_interval by the heartbeat it expects of the accountant; a
// slower heartbeat would leave filters polling at the bound with a stale
// snapshot.
func TestHeartbeatIsTheFiltersFigure(t *testing.T) {
	if HeartbeatInterval > pluginconf.SnapshotHeartbeat {
		t.Errorf("HeartbeatInterval %v is longer than the %v pluginconf bounds sync_interval by", HeartbeatInterval, pluginconf.SnapshotHeartbeat)
	}
}
