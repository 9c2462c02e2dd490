// SPDX-License-Identifier: GPL-2.0
/* MRC switch port egress model for the Linux target (tc clsact egress, cls_bpf direct action).
 *
 * One instance per switch port, in front of the port's HTB root (class 1:1 high priority for
 * trimmed headers and control, class 1:2 for data). It keeps a virtual copy of the port's
 * data queue in bytes, drained at the port's rate, and applies the port's port_policy the way
 * p4src/mrc_switch.p4 does on BMv2:
 *   - a trimmable DATA frame (every MRC header present, outer DSCP DATA) meeting a queue above
 *     the trim threshold is cut to its 146 header bytes, its lengths fixed (outer 92, inner 52,
 *     UDP 52), its outer DSCP set to TRIMMED, and sent in the high class; an ECT one also
 *     leaves CE when the queue is above the ECN threshold too and the port is not a last hop
 *     (congestion met inside the fabric: the receiver NACKs it TRIMMED, not TRIMMED_LASTHOP),
 *     counted as trimmed, not as marked;
 *   - any other frame of the data class is tail-dropped when it does not fit in the buffer;
 *   - an ECT frame of the data class meeting a queue above the ECN threshold is marked CE,
 *     except on a last-hop (host-facing) port;
 *   - control (DSCP CONTROL) and already-trimmed frames go to the high class untouched.
 * Counters (marked, trimmed, dropped, sent) live next to the queue in the state map, which the
 * shim reads. Thresholds arrive in bytes (the shim converts P4 packet depths).
 * Docs: docs/linux-target.md ("Egress: ECN, trimming, priority queues").
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Frame layout (docs/design.md §4, p4src/include/constants.p4); tests/unit/test_bpf_constants.py
 * ties every number below to the Python side. */
#define ETH_P_IPV6_BE 0x86DD
#define OUTER_OFF 14
#define INNER_OFF 54
#define UDP_OFF 94
#define BTH_OFF 102
#define TRIMMED_FRAME_LEN 146
#define TRIMMED_OUTER_PLEN 92
#define TRIMMED_UDP_LEN 52
#define ROCEV2_PORT 4791
#define IPPROTO_IPV6_NH 41
#define IPPROTO_UDP_NH 17

#define DSCP_DATA 26
#define DSCP_CONTROL 48
#define DSCP_TRIMMED 46

/* HTB classes of the port's root qdisc 1: (skb->priority = major:minor selects the leaf). */
#define CLASS_HIGH 0x00010001
#define CLASS_DATA 0x00010002

#define NS_PER_S 1000000000ULL

/* Set by the shim from port_policy; valid 0 = no entry (never mark, never trim). */
struct policy {
	__u32 valid;
	__u32 last_hop;
	__u64 ecn_threshold; /* bytes */
	__u64 trim_threshold; /* bytes */
};

/* Set at setup and when the port is slowed: rate 0 = unlimited (the queue never builds). */
struct link {
	__u64 rate_bps;
	__u64 buffer_bytes; /* 0 = no tail drop */
};

struct state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 queue_bytes; /* virtual data queue */
	__u64 last_ns;
	__u64 max_queue_bytes;
	__u64 marked_packets;
	__u64 marked_bytes;
	__u64 trimmed_packets;
	__u64 trimmed_bytes; /* bytes of the frames before the cut, as BMv2's drop_reason counts */
	__u64 dropped_packets;
	__u64 dropped_bytes;
	__u64 high_packets;
	__u64 sent_packets;
	__u64 sent_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct policy);
} mrc_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct link);
} mrc_link SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct state);
} mrc_state SEC(".maps");

enum verdict { PASS, MARK, TRIM, DROP };

SEC("tc")
int mrc_egress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct policy *pol = bpf_map_lookup_elem(&mrc_policy, &zero);
	struct link *lnk = bpf_map_lookup_elem(&mrc_link, &zero);
	struct state *st = bpf_map_lookup_elem(&mrc_state, &zero);
	if (!pol || !lnk || !st)
		return TC_ACT_OK;

	__u8 hdr[BTH_OFF + 1] = {};
	__u32 len = skb->len;
	int ipv6 = 0, mrc_data = 0, ect = 0;
	__u32 dscp = 0;
	if (len >= INNER_OFF && bpf_skb_load_bytes(skb, 0, hdr, INNER_OFF) == 0 &&
	    hdr[12] == (ETH_P_IPV6_BE >> 8) && hdr[13] == (ETH_P_IPV6_BE & 0xff) && (hdr[OUTER_OFF] >> 4) == 6) {
		ipv6 = 1;
		__u32 tc = ((hdr[OUTER_OFF] & 0x0f) << 4) | (hdr[OUTER_OFF + 1] >> 4);
		dscp = tc >> 2;
		ect = (tc & 3) == 1 || (tc & 3) == 2;
		if (len >= TRIMMED_FRAME_LEN && hdr[OUTER_OFF + 6] == IPPROTO_IPV6_NH &&
		    bpf_skb_load_bytes(skb, 0, hdr, sizeof(hdr)) == 0 && hdr[INNER_OFF + 6] == IPPROTO_UDP_NH &&
		    hdr[UDP_OFF + 2] == (ROCEV2_PORT >> 8) && hdr[UDP_OFF + 3] == (ROCEV2_PORT & 0xff)) {
			__u8 op = hdr[BTH_OFF];
			mrc_data = op == 0x06 || op == 0x07 || op == 0x08 || op == 0x0A;
		}
	}
	int high = ipv6 && (dscp == DSCP_CONTROL || dscp == DSCP_TRIMMED);
	int trimmable = mrc_data && dscp == DSCP_DATA;

	__u64 now = bpf_ktime_get_ns();
	enum verdict v = PASS;
	int trim_ce = 0;
	bpf_spin_lock(&st->lock);
	__u64 rate = lnk->rate_bps;
	__u64 q = st->queue_bytes;
	if (rate == 0) {
		q = 0;
	} else if (q) {
		__u64 dt = now - st->last_ns;
		if (dt >= NS_PER_S) {
			q = 0; /* idle for a second: drained at any rate we support (≤ 100 Gbit/s) */
		} else {
			__u64 drained = dt * (rate / 8) / NS_PER_S;
			q = drained >= q ? 0 : q - drained;
		}
	}
	st->last_ns = now;
	__u64 out_len = len;
	if (!high) {
		if (trimmable && pol->valid && q > pol->trim_threshold) {
			v = TRIM;
			trim_ce = ect && !pol->last_hop && q > pol->ecn_threshold;
			out_len = TRIMMED_FRAME_LEN;
			st->trimmed_packets++;
			st->trimmed_bytes += len;
		} else if (lnk->buffer_bytes && q + len > lnk->buffer_bytes) {
			v = DROP;
			st->dropped_packets++;
			st->dropped_bytes += len;
		} else if (ect && pol->valid && !pol->last_hop && q > pol->ecn_threshold) {
			v = MARK;
			st->marked_packets++;
			st->marked_bytes += len;
		}
	}
	if (v != DROP) {
		/* Every frame that leaves takes link time, so high-class frames delay the data queue too. */
		if (rate)
			q += out_len;
		st->sent_packets++;
		st->sent_bytes += out_len;
		if (high || v == TRIM)
			st->high_packets++;
	}
	st->queue_bytes = q;
	if (q > st->max_queue_bytes)
		st->max_queue_bytes = q;
	bpf_spin_unlock(&st->lock);

	if (v == DROP)
		return TC_ACT_SHOT;
	if (v == MARK) {
		__u8 b1 = hdr[OUTER_OFF + 1] | 0x30; /* ECN bits are the low 2 bits of the traffic class */
		bpf_skb_store_bytes(skb, OUTER_OFF + 1, &b1, 1, 0);
	}
	if (v == TRIM) {
		if (bpf_skb_change_tail(skb, TRIMMED_FRAME_LEN, 0))
			return TC_ACT_SHOT;
		__u32 tc = (((hdr[OUTER_OFF] & 0x0f) << 4) | (hdr[OUTER_OFF + 1] >> 4));
		tc = (DSCP_TRIMMED << 2) | (trim_ce ? 3 : (tc & 3));
		__u8 vt[2] = {(__u8)(0x60 | (tc >> 4)), (__u8)(((tc & 0x0f) << 4) | (hdr[OUTER_OFF + 1] & 0x0f))};
		__u16 outer_plen = bpf_htons(TRIMMED_OUTER_PLEN);
		__u16 udp_len = bpf_htons(TRIMMED_UDP_LEN);
		bpf_skb_store_bytes(skb, OUTER_OFF, vt, 2, 0);
		bpf_skb_store_bytes(skb, OUTER_OFF + 4, &outer_plen, 2, 0);
		bpf_skb_store_bytes(skb, INNER_OFF + 4, &udp_len, 2, 0);
		bpf_skb_store_bytes(skb, UDP_OFF + 4, &udp_len, 2, 0);
	}
	skb->priority = (high || v == TRIM) ? CLASS_HIGH : CLASS_DATA;
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
