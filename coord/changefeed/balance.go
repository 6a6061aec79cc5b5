package changefeed

import "sort"

// balance decides which leases the instance me should try to acquire, by the
// .NET processor's EqualPartitionsBalancingStrategy: every live instance
// aims at ceil(leases / instances); an instance below its share first takes
// expired (or released) leases, and otherwise steals one lease per round
// from the instance holding the most, so the fleet converges without
// leases ping-ponging. expired tells whether a lease's owner is gone.
func balance(all []*Lease, me string, expired func(*Lease) bool) []*Lease {
	if len(all) == 0 {
		return nil
	}
	counts := map[string]int{me: 0}
	var free []*Lease
	for _, l := range all {
		if l.Owner == "" || expired(l) {
			free = append(free, l)
			continue
		}
		counts[l.Owner]++
	}
	workers := len(counts)
	target := 1
	if len(all) > workers {
		target = (len(all) + workers - 1) / workers
	}
	need := target - counts[me]
	if need <= 0 {
		return nil
	}
	if len(free) > 0 {
		if len(free) > need {
			free = free[:need]
		}
		return free
	}
	// Steal one lease from the instance with the most; ties go to the
	// greatest name so every instance picks the same victim.
	owners := make([]string, 0, len(counts))
	for o := range counts {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	victim, most := "", 0
	for _, o := range owners {
		if o != me && counts[o] >= most {
			victim, most = o, counts[o]
		}
	}
	threshold := target
	if need > 1 {
		threshold--
	}
	if victim == "" || most <= threshold {
		return nil
	}
	for _, l := range all {
		if l.Owner == victim {
			return []*Lease{l}
		}
	}
	return nil
}
