package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
)

func TestLocal(t *testing.T) {
	ctx := context.Background()
	s := NewLocal()
	aug10 := time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC)
	day := Key{ID: "d", Unit: calendar.Day, Start: aug10.Unix()}
	month := Key{ID: "m", Unit: calendar.Month, Start: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC).Unix()}
	old := Key{ID: "d", Unit: calendar.Day, Start: aug10.AddDate(0, 0, -1).Unix()}

	// Several deltas of one key in one batch: each value is the running total.
	got, _ := s.Add(ctx, []Delta{{day, 2}, {month, 5}, {day, 3}, {old, 1}}, nil)
	if fmt.Sprint(got) != "[2 5 5 1]" {
		t.Errorf("Add values = %v", got)
	}
	cur, _ := s.Current(ctx, aug10.Add(12*time.Hour))
	if len(cur) != 2 {
		t.Errorf("Current at noon = %v, want the day and month counters", cur)
	}
	// Midnight: the new day starts at zero (absent), the month goes on.
	cur, _ = s.Current(ctx, aug10.AddDate(0, 0, 1))
	if len(cur) != 1 || cur[0].Key != month || cur[0].Value != 5 {
		t.Errorf("Current next day = %v", cur)
	}
	s.Expire(ctx, aug10)
	if _, ok := s.m[old]; ok {
		t.Error("Expire kept a period that ended")
	}
	if _, ok := s.m[day]; !ok {
		t.Error("Expire dropped the current day")
	}
	s.Replace(ctx, []Counter{{day, 7}, {day, 1}})
	cur, _ = s.Current(ctx, aug10)
	if len(cur) != 1 || cur[0].Value != 8 {
		t.Errorf("after Replace: %v", cur)
	}
}
