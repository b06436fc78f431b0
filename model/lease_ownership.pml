/*
 * epochgc's node leases and partition ownership, for SPIN: discrete time
 * (one tick is one second) without an end, node lease renewals that land
 * late or whose answer is lost, a takeover judged on the taker's own clock
 * with the store's whole-second stamps, a node joining, a node leaving
 * cleanly or crashing, and the ownership round's term raise and hand-back.
 * docs/internals.md ("The protocol, model-checked") says what is abstracted.
 *
 * Time is kept as ages, not dates: each timestamp the protocol compares is
 * held as "seconds since", and a tick adds one to each, stopping at
 * AGE_CAP. Every comparison the protocol makes is of an age with a
 * constant below AGE_CAP - 1 (the one subtraction, a watch started a
 * second after a stamp, takes one off a capped age), so a capped age
 * answers every comparison as the true age would: the model is exact for
 * runs of any length, and a takeover a TTL after the last renewal is in
 * every run that waits for it.
 *
 * Weakened variants (spin -DWEAKEN_xxx), each a defect of the code before
 * it was fixed or a rule taken out, must yield a counterexample:
 *   WEAKEN_LATE_RENEWAL    a renewal answered after its grant lapsed counts
 *                          from its send time and keeps the incarnation
 *   WEAKEN_RAISE_LOST      a term raise whose answer is lost leaves the
 *                          node settled: its record is never read again
 *   WEAKEN_HANDBACK_LOST   a hand-back whose answer is lost leaves the node
 *                          settled: a release that did not land leaves the
 *                          record naming a live node that leads nothing,
 *                          and no node ever takes the partition
 *   WEAKEN_LEAVE_LEADS_ON  a node that leaves releases its records and its
 *                          lease before it stops leading
 *   WEAKEN_NO_EXPIRED_TAKEOVER  a node takes a partition only when it is
 *                          released, never when its owner's lease expired:
 *                          a crashed node's partition is never owned again
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
#ifndef LOST
#define LOST 1              /* answers lost (term raise, hand-back, release) */
#endif
#ifndef CRASH
#define CRASH 1             /* node 0 may crash (and stays down) */
#endif
#ifndef LEAVE
#define LEAVE 1             /* node 0 may leave cleanly (and stays away) */
#endif

/* ages stop here: the largest constant an age is compared with is TTL, and
 * a capped age may lose one (the watch started a second after a stamp) */
#ifndef AGE_CAP
#define AGE_CAP (TTL + STAMP_RESOLUTION)
#endif
#if AGE_CAP < TTL + STAMP_RESOLUTION
#error AGE_CAP must exceed every constant an age is compared with
#endif
#define AGE(x) if :: x < AGE_CAP -> x++ :: else -> skip fi

/* incarnations, relative to node 0's current one (they only grow, and the
 * protocol only asks "is it the current one") */
#define NONE 0              /* a record: released */
#define CUR 1               /* node 0's current incarnation */
#define OLD 2               /* an earlier incarnation of node 0 */

/* counters for the printed steps only: hidden, so not part of a state */
hidden byte clk, ver = 1, inc = 1, term = 1;  /* clk: the time, for printing */

/* ---- node 0's lease (leases/node_lease.py, core.py, timing.py) ---- */
byte ag = 0;            /* age of the send time of node 0's counted grant */
byte as = 0;            /* age of the send time of the renewal in flight */
byte av = 0;            /* age of the lease's current version (store time) */
bool sending = 0;       /* a renewal is in flight */
bool landed = 0;        /* ... and it landed */
bool alive0 = 1;        /* holds a grant (crash or release: no more) */
byte stopping = 0;      /* clean stop: 1 records to release, 2 lease, 3 done */
bool lease_rel = 0;     /* the lease's current version says released */
#define VALID0 (alive0 && ag < TTL - MARGIN)

/* ---- the partition's ownership record (epochgc/ownership/owner_records.py) ---- */
byte owner = 0;         /* node named */
byte rec_inc = CUR;     /* incarnation named: NONE (released), CUR, OLD */

/* ---- each node's belief (epochgc/ownership/node_ownership.py `_mine`) ---- */
bool mine0 = 1;         /* node 0 holds the record for its current incarnation */
bool mine_cur0 = 1;     /* the ETag node 0 holds for it is the record's current one */
bool settled0 = 1;
bool leads0 = 1;        /* node 0 leads the partition (its term started) */
bool broke = 0;         /* node 0's leader broke once */
bool mine1 = 0;         /* node 1 holds the record */
bool leads1 = 0;

/* ---- node 1's view of node 0's lease (cluster_view.py, timing.py VersionWatch) ---- */
bool joined = 0;        /* node 1 joined: the partition is node 1's share */
bool seen_cur = 0;      /* node 1 has seen the lease's current version */
bool seen_rel = 0;      /* ... and that version says released */
byte aw = 0;            /* age of the start of node 1's watch of that version */

byte lost = LOST;
bool calm = 0;          /* the faults have stopped (liveness runs only) */

#define VIOLATION(cond, text) \
	if :: !(cond) -> printf(text); assert(false) :: else -> skip fi

/* a new version of node 0's lease lands now */
#define NEW_VERSION ver++; av = 0; seen_cur = 0; seen_rel = 0

/* Time: one tick ages every timestamp. Each process counts on its own
 * monotonic clock, which runs at this rate from a start of its own; only
 * differences are compared, so skew between processes never enters a
 * decision. What may disagree is the store's stamps, whole seconds from
 * gateways whose clocks differ by up to STAMP_ERROR (the watch in Node1).
 * Once the faults have stopped (liveness runs), every process acts within
 * the second: the clock ticks only when nothing else can move. */
proctype Clock() {
	do
	:: atomic {
#ifdef LIVENESS
		(!calm || timeout) ->
#endif
		clk++; AGE(ag); AGE(av); AGE(aw);
		if :: sending -> AGE(as) :: else -> skip fi;
		printf("STEP clock: t = %d\n", clk)
	}
	od
}

#ifdef LIVENESS
/* Weak fairness in SPIN is a process's: a process that can always move
 * moves, but which of its steps it takes is free. So each step that a fair
 * run must take is a process's only one here (the end of the faults, the
 * takes), or ends by its own effect (the round's steps). */
proctype Calm() {
	atomic { calm = 1; printf("STEP (the faults stop at t = %d)\n", clk) }
}
#endif

/* Node 0's lease: leases/node_lease.py renew (send, landing, answer) */
proctype Lease0() {
end:
	do
	:: atomic {
		alive0 && stopping == 0 && !sending && ag >= RENEW ->
		sending = 1; as = 0;
		printf("STEP leases/node_lease.py renew: sent at t = %d over version %d\n", clk, ver)
	}
	:: atomic {
		sending && !landed ->
		/* the conditional write lands, maybe late (nobody else writes
		 * node 0's lease: it is node 0's version that it names) */
		NEW_VERSION; landed = 1;
		printf("STEP leases/core.py: renewal landed at t = %d (version %d)\n", clk, ver)
	}
	:: atomic {
		landed ->
		/* the answer, or (lost) the re-read that finds our bytes */
		if
		:: ag >= TTL - MARGIN ->
#ifdef WEAKEN_LATE_RENEWAL
			printf("STEP leases/node_lease.py: renewal answered at t = %d after the grant lapsed; counted from its send time\n", clk);
			ag = as
#else
			/* the previous grant lapsed: peers may have judged node 0
			 * dead, so this is a re-acquisition under a new incarnation
			 * (a second write, whose body names it), and nothing of the
			 * old one is owned */
			inc++; ag = as; mine0 = 0; leads0 = 0; settled0 = 0;
			if :: owner == 0 && rec_inc == CUR -> rec_inc = OLD :: else -> skip fi;
			NEW_VERSION;
			printf("STEP leases/node_lease.py: renewal answered at t = %d after the grant lapsed; re-acquired as incarnation %d (version %d)\n", clk, inc, ver)
#endif
		:: else ->
			ag = as;
			printf("STEP leases/node_lease.py: renewed; valid for %d more seconds on its own clock\n", TTL - MARGIN - ag)
		fi;
		sending = 0; landed = 0; as = 0
	}
	od
}

/* node 0's crash, or its clean stop (node_ownership.py stop: the heartbeat
 * stops, `_mine` is emptied, each held record is released, then the lease) */
proctype Stop0() {
	bool held;              /* the record to release, as node 0 held it */
end:
	do
	:: atomic {
		CRASH && alive0 && stopping == 0 && !sending && !calm -> alive0 = 0; leads0 = 0;
		printf("STEP reconciler/node.py: node 0 crashed at t = %d\n", clk)
	}
	:: atomic {
		LEAVE && alive0 && stopping == 0 && !sending && !calm ->
		stopping = 1; held = mine0;
#ifndef WEAKEN_LEAVE_LEADS_ON
		/* node_ownership.py stop: `_mine` is emptied under the round's
		 * lock before anything is released; the reconciler leads owned() */
		mine0 = 0; leads0 = 0;
#endif
		printf("STEP epochgc/ownership/node_ownership.py stop (node 0): the heartbeat stops, the partition is no longer owned at t = %d\n", clk)
	}
	:: atomic {
		stopping == 1 ->
		/* owner_records.py release: If-Match the ETag held (best effort) */
		if
		:: held && mine_cur0 && owner == 0 && rec_inc == CUR ->
			if
			:: rec_inc = NONE; mine_cur0 = 0;
				printf("STEP epochgc/ownership/owner_records.py release (node 0 stopping): the record is released\n")
			:: lost > 0 && !calm -> lost--;
				printf("STEP epochgc/ownership/owner_records.py release (node 0 stopping): failed; the record goes after a TTL\n")
			fi
		:: else ->
			printf("STEP epochgc/ownership/node_ownership.py stop (node 0): no record of ours to release\n")
		fi;
		stopping = 2; held = 0
	}
	:: atomic {
		stopping == 2 ->
		/* node_lease.py release: the lease's version says released, and
		 * the grant is dropped (is_valid is false from here) */
		NEW_VERSION; lease_rel = 1; alive0 = 0; stopping = 3;
#ifdef WEAKEN_LEAVE_LEADS_ON
		mine0 = 0; leads0 = 0;
#endif
		printf("STEP leases/node_lease.py release (node 0 stopping): version %d says released at t = %d\n", ver, clk)
	}
	od
}

/* Node 1: joins, and takes the partition when its record is released, when
 * the record's owner is not live in node 1's view (node 0's lease seen
 * unchanged for a TTL on node 1's own clock, seen released, or seen under
 * another incarnation than the record names), as ownership/assignment.py
 * is_free and plan_round decide, with the watch of cluster_view.py and
 * leases/timing.py. */
proctype Watch1() {
end:
	do
	:: atomic { !joined -> joined = 1;
		printf("STEP epochgc/ownership/assignment.py: node 1 joined; the partition is now node 1's share\n") }
	:: atomic {
		joined && !seen_cur ->
		/* a listing shows a new version; its store stamp lets the watch
		 * start at the latest time the stamps allow, never before the write */
		seen_cur = 1; seen_rel = lease_rel;
		if
		:: aw = 0
		:: av > 0 -> aw = av - STAMP_RESOLUTION
		:: aw = (av + STAMP_ERROR < AGE_CAP -> av + STAMP_ERROR : AGE_CAP)
			/* a gateway whose clock is behind by up to STAMP_ERROR */
		fi;
		if
		:: seen_rel -> printf("STEP epochgc/ownership/cluster_view.py (node 1): sees version %d of node 0's lease at t = %d: released; node 0 is not live\n", ver, clk)
		:: else -> printf("STEP epochgc/ownership/cluster_view.py (node 1): sees version %d of node 0's lease at t = %d; watches from %d seconds ago\n", ver, clk, aw)
		fi
	}
	od
}

/* node 1's ownership round: its takes */
proctype Take1() {
end:
	do
	:: atomic {
		joined && !mine1 && seen_cur && owner == 0 && rec_inc != NONE &&
#ifdef WEAKEN_NO_EXPIRED_TAKEOVER
		(seen_rel || rec_inc == OLD) ->
#else
		(aw >= TTL || seen_rel || rec_inc == OLD) ->
#endif
		/* take over: CAS on the record with term + 1 */
		if
		:: aw >= TTL && !seen_rel && rec_inc == CUR ->
			VIOLATION(!VALID0, "VIOLATION lease exclusivity: taken while the owner's lease is valid on its own clock\n");
			printf("STEP epochgc/ownership/node_ownership.py (node 1): node 0's lease unchanged for a TTL; takes the partition over at term %d\n", term + 1)
		:: else ->
			printf("STEP epochgc/ownership/node_ownership.py (node 1): the record's owner is not live (lease released, or another incarnation); takes the partition over at term %d\n", term + 1)
		fi;
		owner = 1; rec_inc = CUR; term++; mine_cur0 = 0; mine1 = 1; leads1 = 1
	}
	:: atomic {
		joined && !mine1 && owner == 0 && rec_inc == NONE ->
		/* released: taken at once */
		owner = 1; rec_inc = CUR; term++; mine_cur0 = 0; mine1 = 1; leads1 = 1;
		printf("STEP epochgc/ownership/node_ownership.py (node 1): takes the released partition at term %d\n", term)
	}
	od
}

/* Node 0's ownership round (epochgc/ownership/node_ownership.py): raises its term
 * after its leader broke, hands the partition back once it is node 1's
 * share, and re-reads records when unsettled. Rounds and stop are
 * serialized (one lock): no round runs once the node is stopping. */
proctype Round0() {
end:
	do
	:: atomic {
		/* raise_term: CAS If-Match on the record */
		stopping == 0 && VALID0 && mine0 && !leads0 && !joined && mine_cur0 ->
		term++;
		if
		:: lost > 0 && !calm -> lost--; mine_cur0 = 0;
#ifdef WEAKEN_RAISE_LOST
			printf("STEP epochgc/ownership/node_ownership.py raise_term: landed at term %d, the answer lost; the error goes up, the node stays settled\n", term)
#else
			settled0 = 0;
			printf("STEP epochgc/ownership/node_ownership.py raise_term: landed at term %d, the answer lost; the partition is marked unsettled\n", term)
#endif
		:: true -> leads0 = 1;
			printf("STEP epochgc/ownership/node_ownership.py raise_term: term %d; node 0 leads\n", term)
		fi
	}
	:: atomic {
		/* a full read when unsettled: the record as it is */
		stopping == 0 && !settled0 && VALID0 ->
		settled0 = 1;
		if
		:: owner == 0 && rec_inc == CUR -> mine0 = 1; mine_cur0 = 1
		:: owner == 0 && rec_inc == OLD && !joined ->
			/* our old incarnation's record, not live, in our share: taken */
			rec_inc = CUR; term++; mine0 = 1; mine_cur0 = 1
		:: else -> mine0 = 0; leads0 = 0
		fi;
		printf("STEP epochgc/ownership/node_ownership.py: full read of the records at t = %d\n", clk)
	}
	:: atomic {
		/* hand back: the partition is node 1's share. The partition is
		 * dropped (no longer led) before the release is sent. */
		stopping == 0 && joined && VALID0 && mine0 ->
		mine0 = 0; leads0 = 0;
		if
		:: mine_cur0 && owner == 0 ->
			if
			:: rec_inc = NONE; mine_cur0 = 0;
				printf("STEP epochgc/ownership/node_ownership.py: hands the partition back to node 1\n")
			:: lost > 0 && !calm -> lost--;
				/* the release may have landed or not: unknown */
				if :: rec_inc = NONE; mine_cur0 = 0 :: skip fi;
#ifdef WEAKEN_HANDBACK_LOST
				printf("STEP epochgc/ownership/node_ownership.py: hand-back's answer lost; the node stays settled\n")
#else
				settled0 = 0;
				printf("STEP epochgc/ownership/node_ownership.py: hand-back's answer lost; the partition is marked unsettled\n")
#endif
			fi
		:: else ->
			/* refused: the record changed under us; dropped, not re-read */
			printf("STEP epochgc/ownership/node_ownership.py: hand-back refused (the record changed); dropped\n")
		fi
	}
	:: atomic {
		/* the leader broke (a failed append): the partition waits for a term raise */
		stopping == 0 && leads0 && !joined && !broke && !calm -> leads0 = 0; broke = 1;
		printf("STEP reconciler/node.py: node 0's leader broke; it needs a new term\n")
	}
	od
}

/* no partition owned by two nodes at once */
proctype Exclusive() {
end:
	atomic {
		(VALID0 && mine0 && leads0 && owner == 1 && leads1) ->
		printf("VIOLATION lease exclusivity: the partition is led by two nodes at once\n");
		assert(false)
	}
}

/* liveness: no partition stays owned on paper by a live node that does
 * not lead it and will not look at its record again */
#define ORPHAN (owner == 0 && rec_inc == CUR && VALID0 && !leads0 && !mine0 && settled0 && stopping == 0)
/* owned: held and led by a node whose lease is valid */
#define OWNED (owner == 1 && leads1 || owner == 0 && rec_inc == CUR && VALID0 && mine0 && leads0)
#ifdef LIVENESS
ltl no_orphan { [] (ORPHAN -> <> !ORPHAN) }
/* node 1 is live and joins (its join is a step weak fairness makes happen),
 * node 0 may crash or leave: once the faults stop, the partition ends up
 * owned for good */
ltl eventually_owned { <> [] OWNED }
#endif

init {
	atomic {
		run Clock(); run Lease0(); run Stop0(); run Watch1(); run Take1(); run Round0(); run Exclusive();
#ifdef LIVENESS
		run Calm()
#endif
	}
}
