/* mrc_switch.p4 plus one table of your own: packets per EV path, counted in each switch.
 *
 * Every MRC frame carries its entropy value (EV) split over the outer flow label (the
 * high 18 bits) and the UDP source port (the low 14): plane(4) | T1(10) | entropy(18).
 * The flow label's bits 17..4 are therefore the EV's path, plane << 10 | T1. The table
 * `ev_path` matches them exactly and counts each hit in a direct counter, so an entry
 * per (plane, T1) tells how many packets of that path crossed this switch -- data,
 * acknowledgements and probes alike (acknowledgements ride the receiver's own EVs).
 *
 * The controller installs the MRC tables (the contract: docs/p4-pipeline.md) and leaves
 * this one alone. Entries come from you, over BMv2's Thrift runtime, e.g. in the
 * testbed's CLI (path of plane 0, T1 1 = 0 << 10 | 1):
 *
 *     mrc> p4 t0p0n0 table_add MrcIngress.user_ingress.ev_path count_path 1 =>
 *     mrc> p4 t0p0n0 table_dump MrcIngress.user_ingress.ev_path
 *
 * Run it:  sudo .venv/bin/mrc-testbed --cli --p4 examples/p4/ev_telemetry.p4
 * Read it: examples/p4_telemetry.py does all of this from Python (docs/mininet-p4.md).
 */
#include <core.p4>
#include <v1model.p4>

#include "../../p4src/include/constants.p4"
#include "../../p4src/include/headers.p4"

control EvTelemetry(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    direct_counter(CounterType.packets_and_bytes) ev_path_hits;

    action count_path() {
        ev_path_hits.count();
    }

    table ev_path {
        key = {
            hdr.outer.flow_label[17:4]: exact @name("path");  /* plane << 10 | T1 */
        }
        actions = {
            count_path;
            @defaultonly NoAction;
        }
        counters = ev_path_hits;
        default_action = NoAction();
        size = 1024;
    }

    apply {
        if (hdr.udp.isValid() && hdr.udp.dst_port == ROCEV2_UDP_PORT) {
            ev_path.apply();
        }
    }
}

#define MRC_INGRESS_EXTRA EvTelemetry
#include "../../p4src/mrc_switch.p4"
