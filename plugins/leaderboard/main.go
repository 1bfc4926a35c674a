// Command leaderboard keeps the latest score of each user and emits the top three after
// every change: an example of two stores and range scans.
//
// Input: key = user, value = score in decimal (an int64); a null value removes the user.
// Stores: "latest" maps user -> score (decimal); "ranking" holds one key per user, the
// score encoded so that ascending key order is descending score, followed by the user, with
// an empty value. Output (first output topic): key "top3", value "user=score,..." for the
// best three (ties in user order), after each input record.
//
// Two values make a record a query that changes nothing: "?" emits key user, value
// "rank/total" (1 is the best; a null value if the user is unknown), counted with range
// scans of ranking; "?*" emits key p (the record's key), value "user=score,..." for every
// user whose name starts with p, in name order, from a prefix scan of latest.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o leaderboard.wasm .
// (or go run ./plugins/build from the repository root).
package main

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/statehost/statehost/pluginsdk"
)

// TopN is the number of users in each emitted leaderboard.
const TopN = 3

func init() {
	pluginsdk.Register(process, pluginsdk.WithStores("latest", "ranking"))
}

func process(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		ctx.Log(pluginsdk.Warn, "skipping record with a null key")
		return nil
	}
	latest, ranking := ctx.Store("latest"), ctx.Store("ranking")
	user := rec.Key

	switch string(rec.Value) {
	case "?":
		return rank(ctx, latest, ranking, user)
	case "?*":
		return withPrefix(ctx, latest, user)
	}

	var score int64
	if !rec.IsNull() {
		var err error
		if score, err = strconv.ParseInt(string(rec.Value), 10, 64); err != nil {
			ctx.Logf(pluginsdk.Warn, "skipping user %q: score %q is not an integer", user, rec.Value)
			return nil
		}
	}

	// Remove the user's old ranking entry, if any.
	old, found, err := latest.Get(user)
	if err != nil {
		return err
	}
	if found {
		oldScore, err := strconv.ParseInt(string(old), 10, 64)
		if err != nil {
			return fmt.Errorf("leaderboard: user %q: stored score %q: %w", user, old, err)
		}
		if err := ranking.Delete(rankKey(oldScore, user)); err != nil {
			return err
		}
	}
	if rec.IsNull() {
		if err := latest.Delete(user); err != nil {
			return err
		}
	} else {
		if err := latest.Put(user, rec.Value); err != nil {
			return err
		}
		if err := ranking.Put(rankKey(score, user), []byte{}); err != nil {
			return err
		}
	}
	return emitTop(ctx, ranking)
}

// emitTop emits the first TopN entries of ranking.
func emitTop(ctx pluginsdk.Context, ranking *pluginsdk.Store) error {
	it := ranking.Range(nil, nil)
	defer it.Close()
	var out []byte
	for i := 0; i < TopN && it.Next(); i++ {
		score, user := parseRankKey(it.Key())
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, user...)
		out = append(out, '=')
		out = strconv.AppendInt(out, score, 10)
	}
	if err := it.Err(); err != nil {
		return err
	}
	if out == nil {
		out = []byte{}
	}
	return ctx.Emit([]byte("top3"), out)
}

// rank emits user's rank ("rank/total", 1 = best) or a null value if the user is unknown:
// it counts the ranking keys before the user's with a range scan.
func rank(ctx pluginsdk.Context, latest, ranking *pluginsdk.Store, user []byte) error {
	v, found, err := latest.Get(user)
	if err != nil {
		return err
	}
	if !found {
		return ctx.Emit(user, nil)
	}
	score, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return err
	}
	above, err := countRange(ranking, nil, rankKey(score, user))
	if err != nil {
		return err
	}
	total, err := countRange(ranking, nil, nil)
	if err != nil {
		return err
	}
	return ctx.Emit(user, fmt.Appendf(nil, "%d/%d", above+1, total))
}

// withPrefix emits the users whose name starts with prefix, with their scores.
func withPrefix(ctx pluginsdk.Context, latest *pluginsdk.Store, prefix []byte) error {
	it := latest.Prefix(prefix)
	defer it.Close()
	out := []byte{}
	for it.Next() {
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, it.Key()...), '='), it.Value()...)
	}
	if err := it.Err(); err != nil {
		return err
	}
	return ctx.Emit(prefix, out)
}

func countRange(s *pluginsdk.Store, start, end []byte) (int, error) {
	it := s.Range(start, end)
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	return n, it.Err()
}

// rankKey encodes score so that a higher score sorts first, then appends user.
func rankKey(score int64, user []byte) []byte {
	k := make([]byte, 8, 8+len(user))
	binary.BigEndian.PutUint64(k, ^(uint64(score) ^ 1<<63))
	return append(k, user...)
}

// parseRankKey decodes a rankKey.
func parseRankKey(k []byte) (int64, []byte) {
	return int64(^binary.BigEndian.Uint64(k[:8]) ^ 1<<63), k[8:]
}

func main() {}
