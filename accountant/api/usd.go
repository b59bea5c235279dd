package api

import (
	"encoding/json"

	"github.com/tokentriage/tokentriage/shared/config"
)

// USDAmount is a dollar amount in the shape of seed 002's documents:
// {"usd":1000,"estimated":false,"unpriced":false}.
type USDAmount struct {
	USD       json.Number `json:"usd"`
	Estimated bool        `json:"estimated"`
	Unpriced  bool        `json:"unpriced"`
}

func usdAmount(nanos int64) *USDAmount {
	return &USDAmount{USD: json.Number(config.USDFromNanos(nanos).String())}
}
