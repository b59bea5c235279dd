package api

import "net/http"

// ReloadResult answers a successful POST reload.
type ReloadResult struct {
	Reloaded bool   `json:"reloaded"`
	Note     string `json:"note"`
}

// ReloadNote says when a reloaded plan takes effect.
const ReloadNote = "the config was re-read and armed; filters pick the new plan up at their next sync"

func (h *handler) reload(w http.ResponseWriter, r *http.Request, p principal) {
	if err := h.Reload(p.who); err != nil {
		h.Logger.Warn("management api: reload failed", "who", p.who, "err", err)
		writeError(w, http.StatusConflict, "reload_failed",
			"the config was not reloaded and the plan armed before stays in force: %v; fix the config file and POST %sreload again", err, Prefix)
		return
	}
	h.Logger.Info("management api: reload", "who", p.who)
	writeJSON(w, http.StatusOK, ReloadResult{Reloaded: true, Note: ReloadNote})
}
