/* MRC switch: SRv6 uSID shift-and-forward with gray-failure injection, ECN and
 * packet trimming, for BMv2 simple_switch_grpc (v1model).
 *
 * One program for every switch role (T0, T1). The controller installs only
 * static state: the switch's own uSID (my_usid), the /48 routes of the next
 * uSIDs (usid_route), per-port faults and per-port policies. Names and ids are
 * the P4Runtime contract in mrc_switch.p4info.txtpb (docs/design.md §5); keep the
 * @name/@id annotations in step with it (tests/unit/test_p4info_matches_p4c.py;
 * `make p4info` copies p4c's P4Info over it on purpose).
 * The pipeline is described in docs/p4-pipeline.md.
 *
 * Your own tables without copying this file: declare a control
 * `(inout headers_t, inout metadata_t, inout standard_metadata_t)`, #define
 * MRC_INGRESS_EXTRA (or MRC_EGRESS_EXTRA) to its name, then #include this file;
 * ingress applies it to every frame after counting it, egress after its own steps
 * (examples/p4/ev_telemetry.p4; run with `mrc-testbed --p4 FILE`, docs/mininet-p4.md).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"

/* Last queue depth seen at egress, per port (data queue only). Egress writes it,
 * ingress reads it to decide whether a data packet "would meet" a congested
 * queue and must be trimmed. Top-level so that both controls can use it. */
@id(1)
register<bit<19>>(MAX_PORTS) egress_qdepth;

/*************************************************************************
 * Parser: Ether / outer IPv6 / inner IPv6 / UDP / BTH / RETH / MRC data.
 * Anything that stops early is still forwarded on its outer header; only a
 * frame whose headers all parsed can be trimmed.
 *************************************************************************/
parser MrcParser(packet_in packet,
                 out headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_outer;
            default: accept;
        }
    }

    state parse_outer {
        packet.extract(hdr.outer);
        transition select(hdr.outer.next_hdr) {
            IPPROTO_IPV6: parse_inner;
            default: accept;
        }
    }

    state parse_inner {
        packet.extract(hdr.inner);
        transition select(hdr.inner.next_hdr) {
            IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            OP_WRITE_FIRST: parse_reth;
            OP_WRITE_MIDDLE: parse_reth;
            OP_WRITE_LAST: parse_reth;
            OP_WRITE_ONLY: parse_reth;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition parse_mrc_data;
    }

    state parse_mrc_data {
        packet.extract(hdr.mrc_data);
        transition accept;
    }
}

control MrcVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }  /* IPv6 has no header checksum; the UDP checksum is 0 (RoCEv2, ICRC checks) */
}

/*************************************************************************
 * Ingress: uSID shift, route (or ECMP), hop limit, faults, policy, trimming.
 *************************************************************************/
control MrcIngress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    @id(1) counter(MAX_PORTS, CounterType.packets_and_bytes) port_rx;
    @id(3) counter(DROP_REASONS, CounterType.packets_and_bytes) drop_reason;

    /* uN: the top 48 bits are block + this switch's uSID. Shift the 80 bits
     * after the /32 block left by 16; zeros enter from the right. */
    @id(1)
    action usid_shift() {
        hdr.outer.dst_addr[95:0] = hdr.outer.dst_addr[79:0] ++ 16w0;
    }

    @id(2)
    action set_next_hop(bit<9> port, bit<48> dmac) {
        meta.out_port = port;
        meta.routed = 1;
        /* The frame leaves with the MAC it was addressed to (this switch's
         * port) as source, and the neighbour's MAC as destination. */
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dmac;
    }

    /* ECMP baseline: the member is picked by a hash in apply{} (actions stay branch-free). */
    @id(3)
    action set_ecmp(bit<16> group_id, bit<16> size) {
        meta.use_ecmp = 1;
        meta.ecmp_group = group_id;
        meta.ecmp_size = size;
    }

    @id(4)
    action drop_no_route() {
        meta.routed = 0;
        meta.use_ecmp = 0;
    }

    @id(5)
    action fault_drop() {
        meta.fault = FAULT_DROP;
    }

    /* Random loss: drop with probability prob / 65536. */
    @id(6)
    action fault_loss(bit<16> prob) {
        meta.fault = FAULT_LOSS;
        meta.fault_prob = prob;
    }

    @id(7)
    action set_port_policy(bit<19> ecn_threshold, bit<19> trim_threshold, bit<1> last_hop) {
        meta.ecn_threshold = ecn_threshold;
        meta.trim_threshold = trim_threshold;
        meta.last_hop = last_hop;
    }

    @id(1)
    table my_usid {
        key = {
            hdr.outer.dst_addr[127:80]: exact @name("dst_top48");
        }
        actions = {
            usid_shift;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 64;
    }

    @id(2)
    table usid_route {
        key = {
            hdr.outer.dst_addr: lpm @name("dst_addr");
        }
        actions = {
            set_next_hop;
            set_ecmp;
            @defaultonly drop_no_route;
        }
        default_action = drop_no_route();
        size = 4096;
    }

    @id(3)
    table ecmp_member {
        key = {
            meta.ecmp_group: exact @name("group_id");
            meta.ecmp_member: exact @name("member");
        }
        actions = {
            set_next_hop;
            @defaultonly drop_no_route;
        }
        default_action = drop_no_route();
        size = 4096;
    }

    /* Gray failures on the egress port chosen by routing (applied here, in
     * ingress, so a faulted packet never takes queue space). */
    @id(4)
    table port_fault {
        key = {
            meta.out_port: exact @name("port");
        }
        actions = {
            fault_drop;
            fault_loss;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 512;
    }

    /* Gray failures on the port the packet came in on. */
    @id(5)
    table ingress_fault {
        key = {
            standard_metadata.ingress_port: exact @name("port");
        }
        actions = {
            fault_drop;
            fault_loss;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 512;
    }

    @id(6)
    table port_policy {
        key = {
            meta.out_port: exact @name("port");
        }
        actions = {
            set_port_policy;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 512;
    }

#ifdef MRC_INGRESS_EXTRA
    MRC_INGRESS_EXTRA() user_ingress;
#endif

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
#ifdef MRC_INGRESS_EXTRA
        user_ingress.apply(hdr, meta, standard_metadata);
#endif
        meta.drop = 0;
        meta.fault = FAULT_NONE;

        if (!hdr.outer.isValid() || hdr.outer.version != 6) {
            drop_reason.count(DROP_MALFORMED);
            meta.drop = 1;
        }

        /* Faults on the ingress port act before anything else. */
        if (meta.drop == 0) {
            ingress_fault.apply();
            if (meta.fault != FAULT_NONE) {
                bit<16> draw;
                random(draw, 16w0, 16w0xFFFF);
                if (meta.fault == FAULT_DROP || draw < meta.fault_prob) {
                    drop_reason.count(DROP_FAULT);
                    meta.drop = 1;
                }
            }
        }

        /* Routing: shift if the active uSID is ours, then the /48 of the next uSID. */
        if (meta.drop == 0) {
            my_usid.apply();
            usid_route.apply();
            if (meta.use_ecmp == 1) {
                if (meta.ecmp_size == 0) {
                    meta.routed = 0;
                } else {
                    hash(meta.ecmp_member, HashAlgorithm.crc16, 16w0,
                         { hdr.outer.src_addr, hdr.outer.dst_addr, hdr.outer.flow_label, hdr.udp.src_port },
                         meta.ecmp_size);
                    ecmp_member.apply();
                }
            }
            if (meta.routed == 0) {
                drop_reason.count(DROP_NO_ROUTE);
                meta.drop = 1;
            }
        }

        /* Hop limit: a packet that would leave with hop limit 0 is dropped. */
        if (meta.drop == 0) {
            if (hdr.outer.hop_limit <= 1) {
                drop_reason.count(DROP_HOP_LIMIT);
                meta.drop = 1;
            } else {
                hdr.outer.hop_limit = hdr.outer.hop_limit - 1;
            }
        }

        /* Faults on the chosen egress port. */
        if (meta.drop == 0) {
            meta.fault = FAULT_NONE;
            port_fault.apply();
            if (meta.fault != FAULT_NONE) {
                bit<16> draw;
                random(draw, 16w0, 16w0xFFFF);
                if (meta.fault == FAULT_DROP || draw < meta.fault_prob) {
                    drop_reason.count(DROP_FAULT);
                    meta.drop = 1;
                }
            }
        }

        if (meta.drop == 1) {
            mark_to_drop(standard_metadata);
        } else {
            standard_metadata.egress_spec = meta.out_port;
            standard_metadata.priority = PRIORITY_DATA;

            /* No port_policy entry: never mark, never trim. */
            meta.ecn_threshold = QDEPTH_NEVER;
            meta.trim_threshold = QDEPTH_NEVER;
            meta.last_hop = 0;
            port_policy.apply();

            /* Trimming: a trimmable data packet that would meet a queue above the
             * trim threshold leaves as its headers only, in the high-priority queue. */
            if (hdr.mrc_data.isValid() && hdr.outer.dscp == DSCP_DATA) {
                bit<19> depth;
                egress_qdepth.read(depth, (bit<32>)meta.out_port);
                if (depth > meta.trim_threshold) {
                    truncate(TRIMMED_FRAME_LEN);
                    hdr.outer.payload_len = TRIMMED_OUTER_PLEN;
                    hdr.inner.payload_len = TRIMMED_UDP_LEN;
                    hdr.udp.length = TRIMMED_UDP_LEN;
                    hdr.outer.dscp = DSCP_TRIMMED;
                    /* Cut inside the fabric above the ECN threshold too: congestion
                     * experienced, so the receiver NACKs TRIMMED, not TRIMMED_LASTHOP
                     * (egress counts no ecn_marked for it: its ECN is already CE). */
                    if (meta.last_hop == 0 && hdr.outer.ecn != ECN_NOT_ECT
                            && depth > meta.ecn_threshold) {
                        hdr.outer.ecn = ECN_CE;
                    }
                    standard_metadata.priority = PRIORITY_TRIMMED;
                    meta.trimmed = 1;
                    drop_reason.count(DROP_TRIMMED);
                }
            }
        }
    }
}

/*************************************************************************
 * Egress: per-port TX counter, queue-depth register, ECN marking.
 *************************************************************************/
control MrcEgress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    @id(2) counter(MAX_PORTS, CounterType.packets_and_bytes) port_tx;
    @id(4) counter(MAX_PORTS, CounterType.packets_and_bytes) ecn_marked;
#ifdef MRC_EGRESS_EXTRA
    MRC_EGRESS_EXTRA() user_egress;
#endif

    apply {
        port_tx.count((bit<32>)standard_metadata.egress_port);

        /* Remember how deep the data queue of this port is (trim decisions in
         * ingress). Trimmed packets use another queue and must not reset it. */
        if (standard_metadata.priority == PRIORITY_DATA) {
            egress_qdepth.write((bit<32>)standard_metadata.egress_port, standard_metadata.deq_qdepth);
        }

        /* ECN: CE on ECT packets that met a queue above the threshold, except
         * on host-facing (last-hop) ports, as in production MRC. */
        if (hdr.outer.isValid() && meta.last_hop == 0
                && hdr.outer.ecn != ECN_NOT_ECT && hdr.outer.ecn != ECN_CE
                && standard_metadata.enq_qdepth > meta.ecn_threshold) {
            hdr.outer.ecn = ECN_CE;
            ecn_marked.count((bit<32>)standard_metadata.egress_port);
        }
#ifdef MRC_EGRESS_EXTRA
        user_egress.apply(hdr, meta, standard_metadata);
#endif
    }
}

control MrcComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }  /* nothing to recompute: IPv6 has no header checksum, UDP checksum stays 0 */
}

control MrcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.outer);
        packet.emit(hdr.inner);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.reth);
        packet.emit(hdr.mrc_data);
    }
}

V1Switch(MrcParser(), MrcVerifyChecksum(), MrcIngress(), MrcEgress(), MrcComputeChecksum(), MrcDeparser()) main;
