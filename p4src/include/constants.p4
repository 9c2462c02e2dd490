/* MRC switch: constants shared by the parser, ingress and egress.
 *
 * Code points and sizes mirror mrc_host/wire (messages.py, codec.py); when one
 * side changes, change the other (tests/bmv2 send frames built by that codec).
 */
#ifndef MRC_CONSTANTS_P4
#define MRC_CONSTANTS_P4

const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<8>  IPPROTO_IPV6   = 41;   /* outer IPv6 carries the inner IPv6 (SRv6 uSID carrier) */
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> ROCEV2_UDP_PORT = 4791;

/* BTH opcodes of MRC data packets: RC RDMA WRITE first/middle/last/only (RETH in every one). */
const bit<8> OP_WRITE_FIRST  = 0x06;
const bit<8> OP_WRITE_MIDDLE = 0x07;
const bit<8> OP_WRITE_LAST   = 0x08;
const bit<8> OP_WRITE_ONLY   = 0x0A;

/* Every other opcode MRC sends is a control message: SACK 0xC0, NACK 0xC1, PROBE 0xC2,
 * PROBE_ACK 0xC3, CONNECT 0xC4, CONNECT_ACK 0xC5, CREDIT 0xC6, CREDIT_REQUEST 0xC7. The parser
 * stops after their BTH, so none is ever trimmed, whatever its DSCP (CONTROL, below). */

/* DSCP classes (outer IPv6 traffic class, upper 6 bits). */
const bit<6> DSCP_DATA    = 26;  /* first transmission: may be trimmed */
const bit<6> DSCP_TRIMMED = 46;  /* a data packet cut to its headers by a switch */

/* ECN code points (outer IPv6 traffic class, lower 2 bits). */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE      = 3;

/* Header sizes in bytes; a trimmed frame keeps exactly these. */
const bit<32> ETH_LEN      = 14;
const bit<32> IPV6_LEN     = 40;
const bit<32> UDP_LEN      = 8;
const bit<32> BTH_LEN      = 12;
const bit<32> RETH_LEN     = 16;
const bit<32> MRC_DATA_LEN = 16;
/* 146 = where the payload of a DATA frame starts (codec.DATA_HDR_END). */
const bit<32> TRIMMED_FRAME_LEN = ETH_LEN + IPV6_LEN + IPV6_LEN + UDP_LEN + BTH_LEN + RETH_LEN + MRC_DATA_LEN;
/* UDP length (= inner IPv6 payload length) of a trimmed frame: UDP + BTH + RETH + MRC data = 52. */
const bit<16> TRIMMED_UDP_LEN = 52;
/* Outer IPv6 payload length of a trimmed frame: inner IPv6 header + 52 = 92. */
const bit<16> TRIMMED_OUTER_PLEN = 92;

/* Queues: simple_switch_grpc runs with --priority-queues 8; 0 is the lowest, 7 the highest. */
const bit<3> PRIORITY_DATA    = 0;
const bit<3> PRIORITY_TRIMMED = 7;

/* drop_reason counter indexes (documented in docs/p4-pipeline.md); the same list, by name, is
 * mrc_fabric/drop_reasons.py (tests/unit/test_drop_reasons.py checks that they agree). */
const bit<32> DROP_NO_ROUTE  = 0;
const bit<32> DROP_HOP_LIMIT = 1;
const bit<32> DROP_FAULT     = 2;
const bit<32> DROP_TRIMMED   = 3;  /* payload dropped, headers forwarded */
const bit<32> DROP_MALFORMED = 4;  /* not an IPv6 frame we can forward */
/* 5: tail drops at a full egress queue. Only the Linux target counts them (its egress program);
 * BMv2's own queue drops are invisible to this program. Reserved so 5 means the same everywhere. */
const bit<32> DROP_QUEUE_FULL = 5;
const bit<32> DROP_REASONS   = 8;

const bit<32> MAX_PORTS = 512;     /* 9-bit port numbers */

/* Largest 19-bit queue depth: "no threshold" when a port has no port_policy entry. */
const bit<19> QDEPTH_NEVER = 0x7FFFF;

/* Fault kinds set by port_fault / ingress_fault. */
const bit<2> FAULT_NONE = 0;
const bit<2> FAULT_DROP = 1;
const bit<2> FAULT_LOSS = 2;

#endif  /* MRC_CONSTANTS_P4 */
