/*
 * epochgc's node leases and partition ownership, for SPIN: discrete time
 * (one tick is one second), node lease renewals that land late or whose
 * answer is lost, a takeover judged on the taker's own clock with the
 * store's whole-second stamps, a node joining, and the ownership round's
 * term raise. docs/internals.md ("The protocol, model-checked") says what
 * is abstracted.
 *
 * Weakened variants (spin -DWEAKEN_xxx), each a defect of the code before
 * it was fixed, must yield a counterexample:
 *   WEAKEN_LATE_RENEWAL    a renewal answered after its grant lapsed counts
 *                          from its send time and keeps the incarnation
 *   WEAKEN_RAISE_LOST      a term raise whose answer is lost leaves the
 *                          node settled: its record is never read again
 */

/* ---- constants the code defines (tests/model/test_constants.py) ---- */
#define STAMP_RESOLUTION 1  /* store stamps: whole seconds (leases/timing.py) */
#ifndef STAMP_ERROR
#define STAMP_ERROR 1       /* gateways' clocks disagree by up to this */
#endif
#ifndef TTL
#define TTL 4               /* lease TTL, in ticks */
#endif
#ifndef RENEW
#define RENEW 1             /* renew interval */
#endif
#ifndef MARGIN
#define MARGIN 2            /* skew margin: at least the stamps' resolution */
#endif
#ifndef TMAX
#define TMAX 6              /* the last tick of the scope */
#endif
#ifndef LOST
#define LOST 1              /* answers lost */
#endif
#ifndef CRASH
#define CRASH 1             /* node 0 may crash (and stays down) */
#endif

/* time: one clock for everyone. Each process counts on its own monotonic
 * clock, which runs at this rate from a start of its own; only differences
 * are compared, so skew between processes never enters a decision. What
 * may disagree is the store's stamps, whole seconds from gateways whose
 * clocks differ by up to the resolution (the watch in Node1). */
byte now = 0;

/* ---- node 0's lease (leases/node_lease.py, core.py, timing.py) ---- */
byte ver = 1;           /* the lease object's version (its ETag) */
byte ver_at = 0;        /* when that version was written (store time) */
byte inc = 1;           /* node 0's incarnation */
byte gsend = 0;         /* send time of node 0's counted grant */
bool alive0 = 1;
#define VALID0 (alive0 && now < gsend + TTL - MARGIN)

/* ---- the partition's ownership record (epochgc/ownership/owner_records.py) ---- */
byte owner = 0;         /* node named */
byte rec_inc = 1;       /* incarnation named */
byte term = 1;
byte rec_ver = 1;       /* the record's ETag */

/* ---- each node's belief (epochgc/ownership/node_ownership.py `_mine`) ---- */
byte mine_inc0 = 1;     /* incarnation node 0 believes the record names, 0: none */
byte mine_ver0 = 1;     /* the ETag it holds for it */
bool settled0 = 1;
bool mine1 = 0;         /* node 1 holds the record */
bool leads0 = 1;        /* node 0 leads the partition (its term started) */
bool leads1 = 0;

byte lost = LOST;
bool joined = 0;        /* node 1 joined: the partition is node 1's share */


#define VIOLATION(cond, text) \
	if :: !(cond) -> printf(text); assert(false) :: else -> skip fi

proctype Clock() {
	do
	:: atomic { now < TMAX -> now++; printf("STEP clock: t = %d\n", now) }
	:: atomic { now >= TMAX -> break }
	od
}

/* Node 0's lease: leases/node_lease.py renew (send, landing, answer) */
proctype Lease0() {
	byte s, v;
	bool landed;
	do
	:: atomic {
		alive0 && s == 0 && now + 0 >= gsend + RENEW && now < TMAX ->
		s = now + 1; v = ver;     /* s - 1 is the send time: 0 means none */
		printf("STEP leases/node_lease.py renew: sent at t = %d over version %d\n", now, v)
	}
	:: atomic {
		s != 0 && !landed ->
		/* the conditional write lands, maybe late */
		if
		:: ver == v -> ver++; ver_at = now; landed = 1;
			printf("STEP leases/core.py: renewal landed at t = %d (version %d)\n", now, ver)
		:: else -> s = 0; v = 0;
			printf("STEP leases/core.py: renewal refused (the lease changed)\n")
		fi
	}
	:: atomic {
		landed ->
		/* the answer, or (lost) the re-read that finds our bytes */
		if
		:: now >= gsend + TTL - MARGIN ->
#ifdef WEAKEN_LATE_RENEWAL
			printf("STEP leases/node_lease.py: renewal answered at t = %d after the grant lapsed; counted from its send time %d\n", now, s - 1);
			gsend = s - 1
#else
			/* the previous grant lapsed: peers may have judged node 0
			 * dead, so this is a re-acquisition under a new incarnation,
			 * and nothing of the old one is owned */
			inc++; gsend = s - 1; mine_inc0 = 0; leads0 = 0; settled0 = 0;
			printf("STEP leases/node_lease.py: renewal answered at t = %d after the grant lapsed; re-acquired as incarnation %d\n", now, inc)
#endif
		:: else ->
			gsend = s - 1;
			printf("STEP leases/node_lease.py: renewed; valid until t = %d on its own clock\n", gsend + TTL - MARGIN)
		fi;
		s = 0; v = 0; landed = 0
	}
	:: atomic {
		CRASH && alive0 && s == 0 -> alive0 = 0; leads0 = 0;
		printf("STEP reconciler/node.py: node 0 crashed at t = %d\n", now)
	}
	:: atomic { s == 0 && (now >= TMAX || !alive0) -> break }
	od
}

/* Node 1: joins, and takes the partition over when node 0's lease is seen
 * unchanged for a TTL on its own clock (epochgc/ownership/cluster_view.py,
 * leases/timing.py, ownership_round.py), or when node 0 hands it back. */
proctype Node1() {
	byte seen_ver = 0, since = 0;
end:
	do
	:: atomic { !joined -> joined = 1;
		printf("STEP epochgc/ownership/assignment.py: node 1 joined; the partition is now node 1's share\n") }
	:: atomic {
		joined && seen_ver != ver ->
		/* a listing shows a new version; its store stamp lets the watch
		 * start at the latest time the stamps allow, never before the write */
		seen_ver = ver;
		if
		:: since = now
		:: now > ver_at -> since = ver_at + STAMP_RESOLUTION
		:: ver_at >= STAMP_ERROR -> since = ver_at - STAMP_ERROR
			/* a gateway whose clock is behind by up to STAMP_ERROR */
		fi;
		printf("STEP epochgc/ownership/cluster_view.py (node 1): sees version %d of node 0's lease at t = %d; watches from %d\n", ver, now, since)
	}
	:: atomic {
		joined && !mine1 && seen_ver == ver && now >= since + TTL && owner == 0 && rec_inc != 0 ->
		/* take over: CAS on the record with term + 1 */
		VIOLATION(!VALID0, "VIOLATION lease exclusivity: taken while the owner's lease is valid on its own clock\n");
		owner = 1; term++; rec_ver++; mine1 = 1; leads1 = 1;
		printf("STEP epochgc/ownership/node_ownership.py (node 1): node 0's lease unchanged for a TTL; takes the partition at term %d\n", term)
	}
	:: atomic {
		joined && !mine1 && owner == 0 && rec_inc == 0 ->
		/* released: taken at once */
		owner = 1; term++; rec_ver++; mine1 = 1; leads1 = 1; rec_inc = 1;
		printf("STEP epochgc/ownership/node_ownership.py (node 1): takes the released partition at term %d\n", term)
	}
	od
}

/* Node 0's ownership round (epochgc/ownership/node_ownership.py): raises its term
 * after its leader broke, hands the partition back once it is node 1's
 * share, and re-reads records when unsettled. */
proctype Round0() {
end:
	do
	:: atomic {
		/* raise_term: CAS If-Match on the record */
		VALID0 && mine_inc0 == inc && !leads0 && !joined && rec_ver == mine_ver0 ->
		term++; rec_ver++;
		if
		:: lost > 0 -> lost--;
#ifdef WEAKEN_RAISE_LOST
			printf("STEP epochgc/ownership/node_ownership.py raise_term: landed at term %d, the answer lost; the error goes up, the node stays settled\n", term)
#else
			settled0 = 0;
			printf("STEP epochgc/ownership/node_ownership.py raise_term: landed at term %d, the answer lost; the partition is marked unsettled\n", term)
#endif
		:: true -> mine_ver0 = rec_ver; leads0 = 1;
			printf("STEP epochgc/ownership/node_ownership.py raise_term: term %d; node 0 leads\n", term)
		fi
	}
	:: atomic {
		/* a full read when unsettled: the record as it is */
		!settled0 && VALID0 ->
		settled0 = 1;
		if
		:: owner == 0 && rec_inc == inc -> mine_inc0 = inc; mine_ver0 = rec_ver
		:: owner == 0 && rec_inc == 1 && inc != 1 ->
			/* our old incarnation's record: ours to take again */
			rec_inc = inc; term++; rec_ver++; mine_inc0 = inc; mine_ver0 = rec_ver
		:: else -> mine_inc0 = 0
		fi;
		printf("STEP epochgc/ownership/node_ownership.py: full read of the records at t = %d\n", now)
	}
	:: atomic {
		/* hand back: the partition is node 1's share */
		joined && VALID0 && mine_inc0 == inc ->
		if
		:: rec_ver == mine_ver0 && owner == 0 ->
			rec_inc = 0; rec_ver++; mine_inc0 = 0; leads0 = 0;
			printf("STEP epochgc/ownership/node_ownership.py: hands the partition back to node 1\n")
		:: else ->
			/* refused: the record changed under us; dropped, not re-read */
			mine_inc0 = 0; leads0 = 0;
			printf("STEP epochgc/ownership/node_ownership.py: hand-back refused (the record changed); dropped\n")
		fi
	}
	:: atomic {
		/* the leader broke (a failed append): the partition waits for a term raise */
		leads0 && !joined && term == 1 -> leads0 = 0;
		printf("STEP reconciler/node.py: node 0's leader broke; it needs a new term\n")
	}
	od
}

/* no partition owned by two nodes at once */
proctype Exclusive() {
end:
	atomic {
		(VALID0 && mine_inc0 == inc && leads0 && owner == 1 && leads1) ->
		printf("VIOLATION lease exclusivity: the partition is led by two nodes at once\n");
		assert(false)
	}
}

/* liveness: no partition stays owned on paper by a live node that does
 * not lead it and will not look at its record again */
#define ORPHAN (owner == 0 && rec_inc == inc && VALID0 && !leads0 && mine_inc0 != inc && settled0)
#ifdef LIVENESS
ltl no_orphan { [] (ORPHAN -> <> !ORPHAN) }
#endif

init {
	atomic {
		run Clock(); run Lease0(); run Node1(); run Round0(); run Exclusive()
	}
}
