package proxywasm

import (
	"math"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// GetPluginConfiguration returns the plugin configuration
// (config.configuration in Envoy). Only during OnPluginStart.
func GetPluginConfiguration() ([]byte, error) {
	return getBuffer(abi.BufferPluginConfiguration, 0, math.MaxInt32, nil)
}

// GetVMConfiguration returns the VM configuration
// (vm_config.configuration).
func GetVMConfiguration() ([]byte, error) {
	return getBuffer(abi.BufferVMConfiguration, 0, math.MaxInt32, nil)
}

// SetTickPeriodMilliSeconds makes the host call the plugin context's OnTick
// every millSec milliseconds (0 stops it). Each worker VM ticks on its own.
// Only from a plugin context.
func SetTickPeriodMilliSeconds(millSec uint32) error {
	return statusToError(hSetTickPeriod(millSec))
}

// SetEffectiveContext makes contextID the context later host calls act on,
// e.g. an HTTP stream from OnTick. The binding does it itself before a
// DispatchHttpCall callback runs.
func SetEffectiveContext(contextID uint32) error {
	st := hSetEffectiveContext(contextID)
	if st == abi.StatusOK {
		if s := state(); s != nil {
			s.active = contextID
		}
	}
	return statusToError(st)
}

// PluginDone tells the host that a plugin context whose OnPluginDone
// returned false has finished.
func PluginDone() { hDone() }

// GetStatus returns the status of the last failed callout (Envoy: code 11,
// "reset", during a DispatchHttpCall callback with numHeaders 0).
func GetStatus() (code uint32, message string, err error) {
	code, msg, st := hGetStatus()
	if st != abi.StatusOK {
		return 0, "", statusToError(st)
	}
	return code, owned(msg), nil
}
