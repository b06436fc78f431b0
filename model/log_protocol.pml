/*
 * epochgc's log protocol, for SPIN: the controller log, producers, the
 * partition logs, the reconciler nodes, the ticker, the collector with its
 * janitor, a pause, and the store's faults. docs/internals.md ("The protocol,
 * model-checked") says what each process stands for and what is abstracted.
 *
 * Every step that the code does as one request to the store is one atomic
 * step here; a decision taken on something read earlier is a separate step,
 * so the model explores everything that can happen in between.
 *
 * Weakened variants (spin -DWEAKEN_xxx): each removes one rule of the design
 * and must yield a counterexample (tests/model/ checks that it does).
 *   WEAKEN_DELETE_NO_REVISION  delete_topic does not name its revision
 *   WEAKEN_M_FROM_MAX          M(p) from max_applied, not previous_applied
 *   WEAKEN_NO_WINDOW_GATE      advance_reconciled ignores window_offset
 *   WEAKEN_JOIN_ANY_INCARNATION the report join keys entries by name only
 *   WEAKEN_JANITOR_NO_LIVENESS the janitor removes live incarnations too
 *   WEAKEN_PAUSE_ONCE          the pause is read once, before the L0 sweep
 *   WEAKEN_SKIP_LOG_END        a records_lost entry's log_offset is the log
 *                              end, not just below the next placeholder
 *                              that still holds records (RECORDS_LOST=1)
 *   WEAKEN_NO_SNAPSHOT_CHECK   a leader acknowledges a put without checking
 *                              that the stored snapshot is the one it
 *                              expects (SNAPSHOTS=1)
 *
 * Steps print "STEP <module> <what>" and broken invariants "VIOLATION
 * <invariant>"; model/render_trail.py turns a trail into that list.
 */

/* ---- scope (tests/model/ passes -D to change it) ---- */
#ifndef EMAX
#define EMAX 5          /* highest controller offset, i.e. cluster epoch */
#endif
#ifndef NOBJ
#define NOBJ 3          /* L0 objects the producers may upload */
#endif
#ifndef LMAX
#define LMAX 6          /* entries a partition log may hold */
#endif
#ifndef NPROD
#define NPROD 1         /* producers */
#endif
#ifndef PRODUCE_TO
#define PRODUCE_TO 1    /* partitions the producers write to (the others only idle) */
#endif
#ifndef LOST_ANSWERS
#define LOST_ANSWERS 1  /* writes applied whose answer is lost */
#endif
#ifndef CRASHES
#define CRASHES 1       /* node crashes (a takeover at a higher term) */
#endif
#ifndef LAGGING_NODES
#define LAGGING_NODES 0 /* 1: nodes notice a delete only in a later step */
#endif
#ifndef OPERATORS
#define OPERATORS 2     /* 1: only the operator that deletes and recreates */
#endif
#ifndef CRASH_WHEN
#define CRASH_WHEN true /* when the crash may come */
#endif
#ifndef COMPACTION
#define COMPACTION 1    /* the controller compacts once while readers read */
#endif
#ifndef PAUSE
#define PAUSE 1         /* an operator pauses the collector once */
#endif
#ifndef RECORDS_LOST
#define RECORDS_LOST 0  /* an accepted L0 object goes missing before it is
                         * reconciled, and an operator skips it */
#endif
#ifndef SNAPSHOTS
#define SNAPSHOTS 0     /* partition-log snapshots and truncation */
#endif
#define PLOG (RECORDS_LOST || SNAPSHOTS)

#ifndef NTOPIC
#define NTOPIC 1        /* topics: the first is deleted and recreated; a
                         * second is created at the start, never deleted,
                         * and only idles */
#endif
#ifndef NNODE
#define NNODE 2         /* nodes: node 0 leads the partitions written to
                         * and may crash; the others lead the idle ones,
                         * node 1 takes node 0's over */
#endif
#define NPART 2         /* partitions per topic */
#define NINC (NTOPIC + 1) /* the first topic and its recreate, the second */
#define NPID (NINC * NPART) /* partition logs */
#define TOPIC1_INC 2    /* the second topic's incarnation */
#if NTOPIC > 2 || NNODE < 2 || NNODE > 3
#error the model has one or two topics and two or three nodes
#endif

/* ---- constants the code defines (tests/model/test_constants.py) ---- */
#define FIRST_CONTROLLER_OFFSET 1   /* controller offsets start at 1 */
#define NO_WINDOW_OFFSET 0          /* the code's -1: nothing written yet */
#define UNREPORTED_FLOOR 1          /* a partition with no report: revision - 1 */
#define SAFE_EPOCH_BELOW_BOUND 1    /* M(p) = min_epoch_lower_bound - 1 */

/* ---- the controller log (watermarks/controller.py) ---- */
byte ctl = FIRST_CONTROLLER_OFFSET; /* newest offset = cluster epoch */
byte live = 1;                  /* live incarnation + 1, 0: none */
byte inc_rev[NINC];             /* revision of each incarnation, 0: not created */
bool inc_ended[NINC];
byte snap_off = FIRST_CONTROLLER_OFFSET; /* controller snapshot */
byte snap_live = 1;
byte trunc = 0;                 /* entries at or below were deleted */

/* ---- partition logs (watermarks/partition/state.py), by q = inc*2+p ---- */
byte ma[NPID];                  /* max_applied_epoch */
byte pa[NPID];                  /* previous_applied_epoch */
byte wo[NPID];                  /* window_offset (0: none) */
byte mlb[NPID];                 /* min_epoch_lower_bound */
byte rlo[NPID];                 /* reconciled_log_offset */
byte lterm[NPID];               /* newest term_start */
byte llen[NPID];                /* entries written (slots 1..llen) */

/* ---- leaders (watermarks/partition/leader.py, fence.py) ---- */
byte leader[NPID];              /* node leading the partition */

/* ---- L0 objects and their records (ghost truth) ---- */
byte nobj = 0;
byte obj_epoch[NOBJ];
byte obj_pid[NOBJ];
bool obj_up[NOBJ];              /* uploaded */
bool obj_gone[NOBJ];            /* deleted by the collector */
bool obj_acc[NOBJ];             /* a placeholder of it was applied */
bool obj_l1[NOBJ];              /* its records are in L1 */
byte unrec[NPID];               /* accepted objects not yet in L1 */
bool dropped[NINC];             /* the nodes noticed the delete */
bool l1_gone[NINC];             /* the janitor removed the incarnation */

#if PLOG
/* ---- records and placeholders (state.py next_offset, lro; codec.py
 * RetainedPlaceholder), one record per L0 object ---- */
byte obj_slot[NOBJ];            /* the slot its applied placeholder is in */
byte obj_rec[NOBJ];             /* its record's offset (1-based) */
byte nrec[NPID];                /* records written (next_offset) */
byte lro[NPID];                 /* records reconciled or lost, a prefix */
#endif
#if RECORDS_LOST
bool obj_missing[NOBJ];         /* the store lost it before it was in L1 */
bool obj_lost[NOBJ];            /* an applied records_lost names its record */
byte miss_slot[NPID];           /* slot of the missing placeholder, 0: none */
#define DECLARED_LOST(o) obj_lost[o]
#define STUCK(p) (miss_slot[p] != 0 && miss_slot[p] - 1 <= rlo[p])
#else
#define DECLARED_LOST(o) false
#define STUCK(p) false
#endif
#if SNAPSHOTS
byte snap[NPID];                /* slots the partition snapshot covers */
byte trunc_to[NPID];            /* slots at or below were deleted (free again) */
bool obj_ack[NOBJ];             /* acknowledged to the producer */
#define ACKED(o) (obj_acc[o] || obj_ack[o])
#else
#define ACKED(o) obj_acc[o]
#endif

/* ---- node reports (watermarks/safe_epoch/reports.py) ----
 * A node reports M(p) of the partitions it leads, from its replica of the
 * log, which lags the log. The model lets the collector read M(p) of the
 * log itself: the freshest value any report could carry. M(p) only grows,
 * so that is the worst case for safety; a stale, carried or missing report
 * can only lower M. The join's floor (revision - 1) and its incarnation
 * check are modelled as the code has them. */

/* ---- the collector (gc/) ---- */
byte gcM = 0;                   /* M as the collector's tracker holds it */
bool paused = 0;                /* gc/control.json */

/* scratch of atomic steps, reset before each step ends */
hidden byte hk, hp, ho, m_new, i_c, k_c, o_c, best, val;
#define max2(a, b) ((a) > (b) -> (a) : (b))

/* ---- faults ---- */
byte lost_answers = LOST_ANSWERS;
byte crashes = CRASHES;

#define INC(q) ((q) / NPART)
/* a partition no producer writes to only idles: its housekeeping and the
 * reconciler's advance_reconciled after it are one step (no placeholder
 * can fall between them) */
#define IDLE(p) ((p) % NPART >= PRODUCE_TO || INC(p) >= TOPIC1_INC)
#define MP(q) (mlb[q] - SAFE_EPOCH_BELOW_BOUND)
#define LIVE_INC(i) (live == (i) + 1)

#define VIOLATION(cond, text) \
	if :: !(cond) -> printf(text); assert(false) :: else -> skip fi

/* advance_epoch(e, offset) of state.py */
inline advance_epoch(q, e, off) {
	if
	:: e > ma[q] -> pa[q] = ma[q]; ma[q] = e; wo[q] = off
	:: else -> skip
	fi
}

/* _advance_reconciled of state.py: rule 2 (the gate) and rule 3 (previous) */
inline advance_reconciled(q, off) {
	if :: off > rlo[q] -> rlo[q] = off :: else -> skip fi;
#ifdef WEAKEN_NO_WINDOW_GATE
	if :: true ->
#else
	if :: wo[q] <= rlo[q] ->
#endif
#ifdef WEAKEN_M_FROM_MAX
		if :: ma[q] > mlb[q] -> mlb[q] = ma[q] :: else -> skip fi
#else
		if :: pa[q] > mlb[q] -> mlb[q] = pa[q] :: else -> skip fi
#endif
	:: else -> skip
	fi
}

/* a new incarnation's partitions: PartitionState.new(revision), and the
 * first leader's term_start (slot 1) */
inline create_partitions(i, rev) {
	hk = 0;
	do
	:: hk < NPART ->
		hp = i * NPART + hk;
		ma[hp] = rev; pa[hp] = rev; mlb[hp] = rev; wo[hp] = NO_WINDOW_OFFSET;
		rlo[hp] = 0; lterm[hp] = 1; llen[hp] = 1;
		/* node 0 leads what is written to, the others the rest */
		leader[hp] = (IDLE(hp) -> 1 + hp % (NNODE - 1) : 0);
		hk++
	:: else -> break
	od;
	hk = 0; hp = 0
}

/* fence.py admit, against the applied window (the leader's seen window
 * starts there and only moves with admissions the log applies next) */
inline FENCE() {
	if
	:: e < pa[q] ->
		printf("STEP watermarks/partition/fence.py admit: epoch %d below window [%d, %d]: StaleEpoch; object %d is an orphan\n", e, pa[q], ma[q], o);
		t = 0; o = 0; e = 0; q = 0
	:: else ->
		t = lterm[q];
#if SNAPSHOTS
		ts = llen[q];
#endif
		printf("STEP watermarks/partition/fence.py admit: epoch %d admitted (window [%d, %d]) under term %d\n", e, pa[q], ma[q], t)
	fi
}

/* ---------------------------------------------------------------------- */
/* Ticker: watermarks/ticker.py (the ticker role's holder appends epoch_tick) */
proctype Ticker() {
	do
	:: atomic {
		ctl < EMAX -> ctl++;
		printf("STEP watermarks/ticker.py Ticker: epoch_tick at offset %d (cluster epoch %d)\n", ctl, ctl)
	}
	:: atomic { ctl >= EMAX -> break }
	od
}

/* Operator: watermarks/controller.py delete_topic / create_topic, from
 * `epochgc topic delete|create`. Operator 0 deletes the topic; operator 1
 * deletes it and creates it again (the recreate). Each reads the view once,
 * then appends its entry with create-only PUTs at the next free slot
 * (storage/cas_log.py append): a slot lost to another writer makes it
 * re-read the tail and try the next one with the same entry, so a lost slot
 * and its back-off are a delay between the read and the landing, which
 * the two steps below already let anything fall into. */
proctype Operator(byte id) {
	byte r;                         /* the revision read as live */
	/* delete_topic */
	atomic {
		if
		:: live == 0 ->
			printf("STEP watermarks/controller.py delete_topic (operator %d): topic not live; nothing done\n", id);
			goto create
		:: else -> r = inc_rev[live - 1]
		fi
	}
	atomic {
		if
		:: ctl >= EMAX -> r = 0; goto create  /* out of scope */
		:: else -> skip
		fi;
		ctl++;
		printf("STEP watermarks/controller.py delete_topic (operator %d): appended at offset %d naming revision %d\n", id, ctl, r);
		/* fold_controller: _ends_live_incarnation */
#ifdef WEAKEN_DELETE_NO_REVISION
		if :: live != 0 ->
#else
		if :: live != 0 && inc_rev[live - 1] == r ->
#endif
			VIOLATION(inc_rev[live - 1] == r,
				"VIOLATION an incarnation ends only by a delete that named it\n");
			printf("STEP watermarks/controller.py fold_controller: topic@%d ended at offset %d\n", inc_rev[live - 1], ctl);
			inc_ended[live - 1] = 1; live = 0
		:: else ->
			printf("STEP watermarks/controller.py fold_controller: delete at offset %d is a no-op (topic@%d is not live)\n", ctl, r)
		fi;
		r = 0
	}
create:
	if
	:: id == 0 -> skip
	:: id == 1 ->
		/* create_topic: the name must not be live */
		atomic {
			if
			:: live != 0 ->
				printf("STEP watermarks/controller.py create_topic (operator %d): topic exists; nothing done\n", id);
				goto done
			:: else -> skip
			fi
		}
		atomic {
			if
			:: ctl >= EMAX -> skip  /* out of scope */
			:: else ->
				ctl++;
				if
				:: live == 0 ->
					inc_rev[1] = ctl; live = 2;
					create_partitions(1, ctl);
					printf("STEP watermarks/controller.py create_topic (operator %d): topic@%d created at offset %d\n", id, ctl, ctl)
				:: else ->
					printf("STEP watermarks/controller.py create_topic (operator %d): offset %d is not the revision (another create won); nothing done\n", id, ctl)
				fi
			fi
		}
	fi;
done:
	skip
}

/* Compactor: watermarks/controller.py compact (snapshot by CAS, then the
 * entries below it are deleted; the newest entry is kept). */
proctype Compactor() {
	atomic {
		snap_off = ctl; snap_live = live;
		printf("STEP watermarks/controller.py compact: snapshot at offset %d\n", snap_off)
	}
	atomic {
		trunc = snap_off - 1;
		printf("STEP watermarks/controller.py compact: entries up to %d deleted\n", trunc)
	}
}

/* Producer: ingest/producer.py with its epoch cache (watermarks/epoch.py),
 * handing chunks to the partition leader (watermarks/partition/leader.py,
 * fence.py), whose append lands in the partition log (state.py). */
proctype Producer(byte id) {
	byte cache = FIRST_CONTROLLER_OFFSET;
	byte o, e, q;
	byte t;                         /* the term the fence admitted under, 0: rejected */
	bool accepted;
#if SNAPSHOTS
	byte ts;                        /* the log's tail as the leader saw it at the fence */
#endif
	do
	:: atomic {
		nobj < NOBJ && live != 0 ->
		/* the epoch cache is stale or refreshed (its TTL): either may hold */
		if
		:: cache != ctl -> cache = ctl;
			printf("STEP watermarks/epoch.py EpochCache (producer %d): refreshed to epoch %d\n", id, cache)
		:: true -> skip
		fi;
		/* one L0 object, stamped with the cached epoch (at least the revision) */
		o = nobj; nobj++;
		if :: q = (live - 1) * NPART :: PRODUCE_TO > 1 -> q = (live - 1) * NPART + 1 fi;
		e = (cache > inc_rev[INC(q)] -> cache : inc_rev[INC(q)]);
		obj_epoch[o] = e; obj_pid[o] = q; obj_up[o] = 1;
		printf("STEP ingest/producer.py (producer %d): uploaded L0 object %d at epoch %d for topic@%d partition %d\n", id, o, e, inc_rev[INC(q)], q % NPART);
		/* fence.py admit (the upload and the fence are one step here: an
		 * object deleted between them has an epoch below the window) */
		FENCE()
	}
		if
		:: t == 0 -> skip  /* a later upload carries a fresh epoch */
		:: else ->
append:
		/* leader.py: placeholders(term, epoch) lands in the next slot */
		atomic {
			accepted = 0;
			if
			:: llen[q] >= LMAX -> skip /* out of scope: the log is full */
#if SNAPSHOTS
			:: lterm[q] > t && trunc_to[q] >= ts + 1 ->
				/* another leader wrote after the slot this leader chose,
				 * snapshotted and truncated it: the create-only put lands
				 * in the freed slot, below the snapshot, where no replay
				 * looks (term_writer.py _snapshot_check) */
#ifdef WEAKEN_NO_SNAPSHOT_CHECK
				obj_ack[o] = 1;
				printf("STEP watermarks/partition/term_writer.py: placeholders(object %d) put into freed slot %d below the snapshot; acknowledged without a snapshot check\n", o, ts + 1)
#else
				printf("STEP watermarks/partition/term_writer.py: placeholders(object %d) put into freed slot %d; the stored snapshot is not the one expected: FencedError, not acknowledged\n", o, ts + 1)
#endif
#endif
			:: else ->
				llen[q]++;
				if
				:: t < lterm[q] ->
					printf("STEP watermarks/partition/state.py apply: placeholders of term %d at slot %d ignored (stale term)\n", t, llen[q])
				:: t == lterm[q] && e < pa[q] ->
					printf("STEP watermarks/partition/state.py apply: placeholders at epoch %d rejected (below previous_applied %d)\n", e, pa[q])
				:: t == lterm[q] && e >= pa[q] ->
					VIOLATION(!obj_gone[o] || inc_ended[INC(q)], "VIOLATION every acknowledged record stays readable (accepted a deleted object)\n");
					if :: !obj_acc[o] -> obj_acc[o] = 1; unrec[q]++;
#if PLOG
						nrec[q]++; obj_slot[o] = llen[q]; obj_rec[o] = nrec[q];
#endif
						skip
					:: else -> skip fi;
					advance_epoch(q, e, llen[q]);
					accepted = 1;
					printf("STEP watermarks/partition/state.py apply: placeholders(object %d, epoch %d) at slot %d of partition %d; window [%d, %d]\n", o, e, llen[q], q, pa[q], ma[q])
				fi
			fi;
			if
			:: accepted && lost_answers > 0 && llen[q] < LMAX ->
				/* the store applied the put and lost the answer: the
				 * leader ends, the node starts a new term, and the producer
				 * resends the chunk to it (at least once) */
				lost_answers--;
				llen[q]++; lterm[q]++;
				printf("STEP storage/cas_log.py: the append landed, its answer was lost; leader of partition %d restarts: term_start(%d) at slot %d; the producer resends\n", q, lterm[q], llen[q]);
				accepted = 0;
				FENCE();
				if :: t != 0 -> goto append :: else -> skip fi
			:: accepted ->
#if SNAPSHOTS
				obj_ack[o] = 1;
#endif
				printf("STEP ingest/producer.py (producer %d): object %d acknowledged\n", id, o)
			:: !accepted -> skip
			fi;
			accepted = 0; o = 0; e = 0; t = 0; q = 0
		}
		fi
	:: atomic { nobj >= NOBJ -> break }
	od
}

/* a node leads a deleted incarnation's partitions until it notices the
 * delete (node.py drops the partitions whose topic is no longer live) */
#if LAGGING_NODES
#define GONE(i) dropped[i]
#else
#define GONE(i) inc_ended[i]
#endif
#define CAN_RECONCILE(p) (!IDLE(p) && leader[p] == n && inc_rev[INC(p)] != 0 && !GONE(INC(p)) \
	&& llen[p] < LMAX && (unrec[p] > 0 || wo[p] > rlo[p]) && !STUCK(p))
#define CAN_HOUSEKEEP(p) (leader[p] == n && inc_rev[INC(p)] != 0 && !GONE(INC(p)) && ctl > ma[p] \
	&& (IDLE(p) || llen[p] + 1 < LMAX) && unrec[p] == 0 && rlo[p] >= wo[p])
/* (the end of the log is the end of the scope: housekeeping leaves room
 * for the advance_reconciled that follows it) */

bool busy0;                     /* node 0 has an advance_reconciled in flight */

proctype Node(byte n) {
	byte q, off, t;
	bool busy = 0;
#if PLOG
	byte hi;                        /* records copied (the lro it will report) */
#endif
	do
	/* reconcile.py: read the log, copy its placeholders into L1 ... */
	:: atomic {
		if
		:: !busy && CAN_RECONCILE(0) -> q = 0
		:: !busy && CAN_RECONCILE(1) -> q = 1
		:: !busy && CAN_RECONCILE(2) -> q = 2
		:: !busy && CAN_RECONCILE(3) -> q = 3
		fi;
		off = llen[q]; t = lterm[q];
#if RECORDS_LOST
		/* reconcile.py stops at a missing L0 object: it copies what is
		 * before it and reports up to just below its placeholder */
		if :: miss_slot[q] != 0 -> off = miss_slot[q] - 1 :: else -> skip fi;
#endif
#if PLOG
		hi = lro[q];
#endif
		ho = 0;
		do
		:: ho < nobj ->
			if
#if PLOG
			:: obj_pid[ho] == q && obj_acc[ho] && !obj_l1[ho] && !DECLARED_LOST(ho) && obj_slot[ho] <= off ->
#else
			:: obj_pid[ho] == q && obj_acc[ho] && !obj_l1[ho] ->
#endif
				VIOLATION(!obj_gone[ho] || inc_ended[INC(q)], "VIOLATION no L0 object is deleted while a record in it is not in L1 (reconciler: NoSuchKey)\n");
				obj_l1[ho] = 1; unrec[q]--
			:: else -> skip
			fi;
#if PLOG
			if :: obj_pid[ho] == q && obj_acc[ho] && obj_slot[ho] <= off && obj_rec[ho] > hi -> hi = obj_rec[ho] :: else -> skip fi;
#endif
			ho++
		:: else -> break
		od;
		ho = 0;
		busy = 1; busy0 = (n == 0);
		printf("STEP reconciler/reconcile.py (node %d): partition %d read up to slot %d under term %d, placeholders copied to L1\n", n, q, off, t)
	}
	/* ... then append advance_reconciled(term, log_offset) */
	:: atomic {
		busy ->
		busy = 0; busy0 = 0;
		if
		:: llen[q] >= LMAX -> skip
		:: else ->
			llen[q]++;
			if
			:: t != lterm[q] ->
				printf("STEP watermarks/partition/state.py apply: advance_reconciled of term %d ignored (a deposed leader's late append)\n", t)
			:: else ->
#if PLOG
				if :: hi > lro[q] -> lro[q] = hi :: else -> skip fi;
#endif
				advance_reconciled(q, off);
				printf("STEP watermarks/partition/state.py apply: advance_reconciled(log_offset %d) on partition %d: min_epoch_lower_bound %d, M(p) %d\n", off, q, mlb[q], MP(q))
			fi
		fi;
#if PLOG
		hi = 0;
#endif
		q = 0; off = 0; t = 0
	}
	/* node.py housekeeping: an idle, fully reconciled partition advances
	 * its epoch to the cluster epoch through the fence */
	:: atomic {
		if
		:: !busy && CAN_HOUSEKEEP(0) -> q = 0
		:: !busy && CAN_HOUSEKEEP(1) -> q = 1
		:: !busy && CAN_HOUSEKEEP(2) -> q = 2
		:: !busy && CAN_HOUSEKEEP(3) -> q = 3
#if NTOPIC > 1
		:: !busy && CAN_HOUSEKEEP(4) -> q = 4
		:: !busy && CAN_HOUSEKEEP(5) -> q = 5
#endif
		fi;
		if
		:: IDLE(q) ->
			/* no placeholder can fall between the two entries, and the
			 * slots of an idle log do not matter: none are counted */
			advance_epoch(q, ctl, 0); advance_reconciled(q, 0);
			printf("STEP reconciler/node.py housekeeping (node %d): advance_epoch(%d) then advance_reconciled on idle partition %d: M(p) %d\n", n, ctl, q, MP(q))
		:: else ->
			llen[q]++;
			advance_epoch(q, ctl, llen[q]);
			printf("STEP reconciler/node.py housekeeping (node %d): advance_epoch(%d) on partition %d at slot %d\n", n, ctl, q, llen[q])
		fi;
		q = 0
	}
#if SNAPSHOTS
	/* term_writer.py maybe_snapshot: the leader snapshots what it applied
	 * (replica.py write_snapshot), then truncates below the snapshot and
	 * the oldest placeholder not yet reconciled, keeping the newest entry */
	:: atomic {
		if
		:: !busy && leader[0] == n && !IDLE(0) && llen[0] > snap[0] && inc_rev[0] != 0 -> q = 0
		:: !busy && leader[2] == n && !IDLE(2) && llen[2] > snap[2] && inc_rev[1] != 0 -> q = 2
		fi;
		snap[q] = llen[q];
		off = llen[q];              /* the newest entry stays */
		ho = 0;
		do
		:: ho < nobj ->
			if
			:: obj_pid[ho] == q && obj_acc[ho] && obj_rec[ho] > lro[q] && obj_slot[ho] < off -> off = obj_slot[ho]
			:: else -> skip
			fi;
			ho++
		:: else -> break
		od;
		ho = 0;
		if :: off - 1 > trunc_to[q] -> trunc_to[q] = off - 1 :: else -> skip fi;
		printf("STEP watermarks/partition/replica.py (node %d): snapshot of partition %d covers slot %d; slots up to %d truncated\n", n, q, snap[q], trunc_to[q]);
		q = 0; off = 0
	}
#endif
	/* node.py: a deleted topic's partitions are dropped */
	:: atomic {
		LAGGING_NODES && n == 0 && (inc_ended[0] && !dropped[0] || inc_ended[1] && !dropped[1]) ->
		dropped[0] = inc_ended[0]; dropped[1] = inc_ended[1];
		printf("STEP reconciler/node.py: the nodes drop the partitions of a deleted topic\n")
	}
	/* node 0 (which leads the partitions written to) crashes: node 1 takes
	 * its partitions over, each with term_start at the ownership term + 1
	 * (epochgc/ownership/node_ownership.py, watermarks/partition/term_writer.py). What
	 * node 0 had in flight may still land. */
	:: atomic {
		n == 1 && crashes > 0 && !busy && CRASH_WHEN ->
		crashes--;
		printf("STEP reconciler/node.py: node 0 crashed; node %d takes its partitions over\n", n);
		hk = 0;
		do
		:: hk < NPID ->
			if
			:: leader[hk] == 0 && inc_rev[INC(hk)] != 0 && IDLE(hk) ->
				leader[hk] = n
			:: leader[hk] == 0 && inc_rev[INC(hk)] != 0 && !IDLE(hk) && llen[hk] < LMAX ->
				leader[hk] = n; llen[hk]++; lterm[hk]++;
				printf("STEP watermarks/partition/term_writer.py (node %d): term_start(%d) on partition %d at slot %d\n", n, lterm[hk], hk, llen[hk])
			:: else -> skip
			fi;
			hk++
		:: else -> break
		od;
		hk = 0
	}
	od
}

/* Collector: gc/collection_round.py collect_once: M from the controller
 * snapshot and the node reports (watermarks/safe_epoch/aggregate.py
 * join_safe_epoch, SafeEpochTracker), the pause (gc/pause.py), the sweep
 * (gc/sweeper.py, gc/eligibility.py), then the janitor (gc/janitor.py). */
proctype Collector() {
	byte n, v;       /* the round's controller view: offset, live incarnation + 1 */
	byte sn;         /* the snapshot's offset, while the entries after it are read */
	bool go;
	do
	:: /* the controller view (snapshot, then the entries after it), the
	    * node reports (one GET each) and join_safe_epoch */
#if COMPACTION
		atomic { sn = snap_off }
		atomic {
			if
			:: trunc > sn -> go = 0;
				printf("STEP watermarks/controller.py snapshot(): entries after offset %d were truncated; reading the snapshot again\n", sn)
			:: else -> go = 1
			fi;
			sn = 0;
#else
		atomic {
			go = 1;
#endif
			if
			:: go ->
			n = ctl; v = live;
			m_new = n;
			if
			:: v != 0 ->
				i_c = v - 1;
				k_c = 0;
				do
				:: k_c < NPART ->
					best = MP(i_c * NPART + k_c);
#ifdef WEAKEN_JOIN_ANY_INCARNATION
					/* keyed by (topic, partition): the entry of another
					 * incarnation of the name counts too */
					if
					:: inc_rev[1 - i_c] != 0 -> best = max2(best, MP((1 - i_c) * NPART + k_c))
					:: else -> skip
					fi;
#endif
					/* max(reported, revision - 1) */
					val = max2(best, inc_rev[i_c] - UNREPORTED_FLOOR);
					m_new = (val < m_new -> val : m_new);
					k_c++
				:: else -> break
				od
			:: else -> skip
			fi;
#if NTOPIC > 1
			/* the second topic, live throughout */
			k_c = 0;
			do
			:: k_c < NPART ->
				val = max2(MP(TOPIC1_INC * NPART + k_c), inc_rev[TOPIC1_INC] - UNREPORTED_FLOOR);
				m_new = (val < m_new -> val : m_new);
				k_c++
			:: else -> break
			od;
#endif
			/* SafeEpochTracker: M never goes back */
			if :: m_new > gcM -> gcM = m_new;
				printf("STEP watermarks/safe_epoch/aggregate.py join_safe_epoch: M = %d (controller offset %d)\n", gcM, n)
			:: else -> skip
			fi;
			k_c = 0; i_c = 0; val = 0; best = 0; m_new = 0
			:: else -> skip
			fi;
#ifdef WEAKEN_PAUSE_ONCE
		/* collection_round.py reads the pause once, before the L0 sweep */
			go = go && !paused;
			printf("STEP gc/pause.py PauseGuard.check before the sweep: paused = %d\n", paused)
		}
		atomic {
#endif
		/* sweeper.py: every L0 object with epoch <= M. The design's
		 * GuardedStore reads the pause right before each delete request. */
#ifndef WEAKEN_PAUSE_ONCE
			if
			:: go && paused -> go = 0;
				printf("STEP gc/pause.py GuardedStore: paused; the deleting pass stops\n")
			:: else -> skip
			fi;
#endif
			o_c = 0;
			do
			:: o_c < NOBJ && go ->
				if
				:: obj_up[o_c] && !obj_gone[o_c] && obj_epoch[o_c] <= gcM ->
					VIOLATION(!paused, "VIOLATION no deletion while paused\n");
					VIOLATION(inc_ended[INC(obj_pid[o_c])] || !ACKED(o_c) || obj_l1[o_c] || DECLARED_LOST(o_c),
						"VIOLATION no L0 object is deleted while a record in it is not in L1\n");
					obj_gone[o_c] = 1;
					printf("STEP gc/sweeper.py: deleted L0 object %d (epoch %d <= M %d)\n", o_c, obj_epoch[o_c], gcM)
				:: else -> skip
				fi;
				o_c++
			:: else -> break
			od;
			o_c = 0;
		/* janitor.py dead_incarnations, judged against the round's view
		 * (the same GuardedStore) */
			i_c = 0;
			do
			:: i_c < NINC && go ->
				if
#ifdef WEAKEN_JANITOR_NO_LIVENESS
				:: inc_rev[i_c] != 0 && inc_rev[i_c] <= n && !l1_gone[i_c] ->
#else
				:: inc_rev[i_c] != 0 && inc_rev[i_c] <= n && i_c < TOPIC1_INC && v != i_c + 1 && !l1_gone[i_c] ->
#endif
					VIOLATION(!paused, "VIOLATION no deletion while paused\n");
					VIOLATION(inc_ended[i_c],
						"VIOLATION every acknowledged record stays readable (janitor removed a live incarnation)\n");
					l1_gone[i_c] = 1;
					printf("STEP gc/janitor.py: removed logs and L1 objects of topic@%d\n", inc_rev[i_c])
				:: else -> skip
				fi;
				i_c++
			:: else -> break
			od;
			i_c = 0; n = 0; v = 0; go = 0
		}
	od
}

#if RECORDS_LOST
/* The store loses an accepted L0 object before it is in L1 (the fault
 * `epochgc partition skip` exists for): the reconciler stops at it. Then
 * an operator's `epochgc partition skip` (watermarks/partition/skip.py
 * plan_skip, replica.py append_records_lost) plans the records_lost entry
 * from the partition's state, through the missing object's record, and
 * puts it at the next slot; a slot taken (or freed by a truncation, so the
 * entry is not read back) means planning again from the new state. */
proctype Loss() {
	byte o, q, first, lo, seen, t;
	do
	:: o < NOBJ - 1 -> o++      /* which object the store will lose */
	:: break
	od;
	atomic {
		obj_acc[o] && !obj_l1[o] && !obj_gone[o] && !inc_ended[INC(obj_pid[o])] ->
		q = obj_pid[o];
		obj_missing[o] = 1; miss_slot[q] = obj_slot[o];
		printf("STEP storage: L0 object %d (slot %d of partition %d) is missing before it was reconciled\n", o, obj_slot[o], q)
	}
plan:
	atomic {
		/* the range starts right above lro and ends at the missing
		 * object's record; log_offset is just below the next placeholder
		 * that still holds records, or the log end */
		first = lro[q] + 1; lo = llen[q];
#ifndef WEAKEN_SKIP_LOG_END
		ho = 0;
		do
		:: ho < nobj ->
			if
			:: obj_pid[ho] == q && obj_acc[ho] && obj_slot[ho] > obj_slot[o] && obj_slot[ho] - 1 < lo -> lo = obj_slot[ho] - 1
			:: else -> skip
			fi;
			ho++
		:: else -> break
		od;
		ho = 0;
#endif
		seen = llen[q]; t = lterm[q];
		printf("STEP watermarks/partition/skip.py plan_skip (operator): records_lost(term %d, records %d..%d, log_offset %d) for partition %d\n", t, first, obj_rec[o], lo, q)
	}
	atomic {
		if
		:: llen[q] >= LMAX -> skip  /* out of scope */
		:: llen[q] != seen ->
			printf("STEP watermarks/partition/replica.py append_records_lost: slot %d taken (or freed and not read back); planning again\n", seen + 1);
			goto plan
		:: else ->
			llen[q]++;
			if
			:: t != lterm[q] ->
				printf("STEP watermarks/partition/state.py apply: records_lost of term %d ignored (stale term)\n", t)
			:: t == lterm[q] && first != lro[q] + 1 ->
				printf("STEP watermarks/partition/state.py apply: records_lost rejected (the range does not start above lro)\n")
			:: else ->
				/* _apply_records_lost: the lost records count as reconciled */
				ho = 0;
				do
				:: ho < nobj ->
					if
					:: obj_pid[ho] == q && obj_acc[ho] && obj_rec[ho] >= first && obj_rec[ho] <= obj_rec[o] && !obj_lost[ho] ->
						obj_lost[ho] = 1;
						if :: !obj_l1[ho] -> unrec[q]-- :: else -> skip fi
					:: else -> skip
					fi;
					ho++
				:: else -> break
				od;
				ho = 0;
				miss_slot[q] = 0;
				if :: obj_rec[o] > lro[q] -> lro[q] = obj_rec[o] :: else -> skip fi;
				advance_reconciled(q, lo);
				printf("STEP watermarks/partition/state.py apply: records_lost at slot %d: records %d..%d lost; min_epoch_lower_bound %d, M(p) %d\n", llen[q], first, obj_rec[o], mlb[q], MP(q))
			fi
		fi;
		o = 0; q = 0; first = 0; lo = 0; seen = 0; t = 0
	}
}
#endif

/* Pause: gc/control.py, an operator's `epochgc gc pause` then `resume` */
proctype Pause() {
	atomic { paused = 1; printf("STEP gc/control.py: paused by an operator\n") }
	atomic { paused = 0; printf("STEP gc/control.py: resumed\n") }
}

/* Liveness under weak fairness (pan -a -f), once the faults (finitely
 * many) have stopped: the collector's M eventually reaches the bound the
 * partition logs allow, min(cluster epoch, previous_applied - 1 of every
 * live partition), and no L0 object at or below M is left. */
#define PBOUND(p) (pa[p] - SAFE_EPOCH_BELOW_BOUND)
#define REACHED (gcM >= ctl \
	|| live == 1 && (gcM >= PBOUND(0) || gcM >= PBOUND(1)) \
	|| live == 2 && (gcM >= PBOUND(2) || gcM >= PBOUND(3)) \
	|| NTOPIC > 1 && (gcM >= PBOUND(4 % NPID) || gcM >= PBOUND(5 % NPID)))
#define ELIGIBLE(o) (obj_up[o] && !obj_gone[o] && obj_epoch[o] <= gcM)
#if NOBJ > 2
#define ANY_ELIGIBLE (ELIGIBLE(0) || ELIGIBLE(1) || ELIGIBLE(2))
#elif NOBJ > 1
#define ANY_ELIGIBLE (ELIGIBLE(0) || ELIGIBLE(1))
#else
#define ANY_ELIGIBLE ELIGIBLE(0)
#endif
#ifdef LIVENESS
/* a run that filled a partition log left the scope: nothing is claimed */
#define LOG_FULL (llen[0] + 1 >= LMAX || llen[2] + 1 >= LMAX)
ltl eventually_collected { <> [] (REACHED && !ANY_ELIGIBLE || LOG_FULL) }
#endif

init {
	byte k;
	atomic {
		inc_rev[0] = FIRST_CONTROLLER_OFFSET;
		create_partitions(0, FIRST_CONTROLLER_OFFSET);
#if NTOPIC > 1
		inc_rev[TOPIC1_INC] = FIRST_CONTROLLER_OFFSET;
		create_partitions(TOPIC1_INC, FIRST_CONTROLLER_OFFSET);
#endif
		run Ticker();
		run Operator(1);
#if OPERATORS > 1
		run Operator(0);
#endif
#if COMPACTION
		run Compactor();
#endif
		k = 0;
		do :: k < NPROD -> run Producer(k); k++ :: else -> break od;
		k = 0;
		do :: k < NNODE -> run Node(k); k++ :: else -> break od;
		run Collector();
#if RECORDS_LOST
		run Loss();
#endif
#if PAUSE
		run Pause()
#endif
	}
}
