/* MRC switch: header and metadata types.
 *
 * Wire layout (docs/design.md §4, docs/protocol.md): Ether | outer IPv6 (uSID carrier) |
 * inner IPv6 | UDP 4791 | BTH | RETH | MRC data header | payload | ICRC.
 * Only the outer header drives forwarding; the rest is parsed so that a data
 * packet can be trimmed to exactly its headers.
 */
#ifndef MRC_HEADERS_P4
#define MRC_HEADERS_P4

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv6_t {
    bit<4>   version;
    bit<6>   dscp;
    bit<2>   ecn;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header (12 bytes). */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<8>  reserved0;     /* FECN, BECN, reserved */
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<7>  reserved1;
    bit<24> psn;
}

/* RDMA Extended Transport Header (16 bytes), in every MRC data packet. */
header reth_t {
    bit<64> vaddr;
    bit<32> rkey;
    bit<32> dma_len;
}

/* MRC data header (16 bytes): mrc_host/wire/layers.py MrcData. */
header mrc_data_t {
    bit<32> msg_id;
    bit<16> flags;     /* bits 0-1 flags, bits 2-15 the ACK echo (not read here) */
    bit<16> reserved;
    bit<64> send_ts;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     outer;
    ipv6_t     inner;
    udp_t      udp;
    bth_t      bth;
    reth_t     reth;
    mrc_data_t mrc_data;
}

struct metadata_t {
    bit<9>  out_port;        /* egress port chosen by routing (before faults) */
    bit<1>  routed;          /* set_next_hop ran */
    bit<1>  use_ecmp;        /* set_ecmp ran: pick a member */
    bit<16> ecmp_group;
    bit<16> ecmp_size;
    bit<16> ecmp_member;
    bit<2>  fault;           /* FAULT_* of the matching port_fault / ingress_fault entry */
    bit<16> fault_prob;      /* fault_loss: drop probability in 1/65536 */
    bit<1>  drop;            /* decided to drop; later stages do nothing */
    bit<19> ecn_threshold;   /* from port_policy, used by egress */
    bit<19> trim_threshold;
    bit<1>  last_hop;
    bit<1>  trimmed;
}

#endif  /* MRC_HEADERS_P4 */
