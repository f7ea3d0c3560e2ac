package postgres

import (
	"context"
	"time"
)

// Every replica reads its own clock, and clocks drift: a replica whose clock
// runs ahead would take over leases that are still fresh, and sweep keys
// before their window ends. So the store keeps every time it writes and
// compares on the database's clock: it measures the offset between this
// process's clock and PostgreSQL's now (at open, then every minute), and
// shifts the times it is given into the database's clock, and the times it
// returns back. Callers keep passing their own now.
//
// An offset under skewFloor is taken as none: it is within what one round
// trip can measure, and exact times keep the contract's tests exact.

// skewFloor is the smallest offset corrected.
const skewFloor = time.Second

// skewEvery is how often the offset is measured again.
const skewEvery = time.Minute

// measureSkew returns the database clock minus this process's clock, read
// halfway through one round trip.
func (s *Store) measureSkew(ctx context.Context) (time.Duration, error) {
	before := s.clock()
	var db time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&db); err != nil {
		return 0, err
	}
	after := s.clock()
	local := before.Add(after.Sub(before) / 2)
	skew := db.Sub(local)
	if skew > -skewFloor && skew < skewFloor {
		skew = 0
	}
	return skew, nil
}

// trackSkew measures the offset every skewEvery until ctx ends. A failed
// measure keeps the last one.
func (s *Store) trackSkew(ctx context.Context) {
	t := time.NewTicker(skewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		skew, err := s.measureSkew(mctx)
		cancel()
		if err == nil {
			if old := time.Duration(s.skew.Swap(int64(skew))); old != skew && skew != 0 {
				s.log.Warn("this replica's clock differs from the database's; times are kept on the database's clock", "offset", skew)
			}
		}
	}
}

// toDB turns a time of this process's clock into the database's.
func (s *Store) toDB(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(time.Duration(s.skew.Load()))
}

// fromDB turns a time of the database's clock into this process's.
func (s *Store) fromDB(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-time.Duration(s.skew.Load()))
}
