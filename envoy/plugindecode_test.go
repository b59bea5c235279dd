//go:build !ttshim

package envoy_test

import "github.com/tokentriage/tokentriage/shared/pluginconf"

// decodePluginConfig is the decode and compile the filter runs on its
// plugin configuration in proxy_on_configure.
var decodePluginConfig = pluginconf.Decode
