-- Wireshark/tshark dissector for the MRC testbed's headers (docs/protocol.md).
--
-- MRC frames are RoCEv2-shaped (UDP 4791), so Wireshark's InfiniBand dissector already
-- shows the BTH. This script takes UDP port 4791, lets the InfiniBand dissector decode the
-- BTH as before, and adds an "MRC" tree (before InfiniBand's) with what InfiniBand does not
-- know: the outer destination read as a uSID carrier (T0 / T1 / host), the entropy
-- value (EV) split over the UDP source port and the flow label, the RETH that MRC carries
-- in every DATA packet, the MRC data header, trimmed packets, and the vendor opcodes
-- SACK (0xC0), NACK (0xC1), PROBE (0xC2), PROBE_ACK (0xC3), CONNECT (0xC4),
-- CONNECT_ACK (0xC5), CREDIT (0xC6) and CREDIT_REQUEST (0xC7).
--
-- Use: tshark -X lua_script:wireshark/mrc.lua -r capture.pcap -Y mrc
-- or copy it to ~/.local/lib/wireshark/plugins/ (Wireshark >= 3.6 / Lua 5.2).

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection)")

local OP_NAMES = {
    [0x06] = "DATA (WRITE_FIRST)", [0x07] = "DATA (WRITE_MIDDLE)", [0x08] = "DATA (WRITE_LAST)",
    [0x0A] = "DATA (WRITE_ONLY)", [0xC0] = "SACK", [0xC1] = "NACK", [0xC2] = "PROBE",
    [0xC3] = "PROBE_ACK", [0xC4] = "CONNECT", [0xC5] = "CONNECT_ACK", [0xC6] = "CREDIT",
    [0xC7] = "CREDIT_REQUEST",
}
local NACK_REASONS = {
    [1] = "TRIMMED", [2] = "TRIMMED_LASTHOP", [3] = "OUT_OF_WINDOW", [4] = "BAD_RKEY", [5] = "BAD_ADDRESS",
}
local CONNECT_STATUS = { [0] = "ACCEPTED", [1] = "REFUSED", [2] = "RETRY", [3] = "RESET" }
local DSCP_CLASSES = { [26] = "data", [28] = "retransmission", [48] = "control", [46] = "trimmed" }

local f = {
    opcode = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, OP_NAMES),
    qp = ProtoField.uint24("mrc.qp", "Destination QP", base.HEX),
    psn = ProtoField.uint24("mrc.psn", "PSN", base.DEC),
    ev = ProtoField.uint32("mrc.ev", "EV", base.HEX),
    ev_plane = ProtoField.uint8("mrc.ev.plane", "Plane", base.DEC),
    ev_t1 = ProtoField.uint16("mrc.ev.t1", "T1 index", base.DEC),
    ev_entropy = ProtoField.uint32("mrc.ev.entropy", "Entropy", base.HEX),
    class = ProtoField.string("mrc.class", "DSCP class"),
    -- DATA
    va = ProtoField.uint64("mrc.reth.va", "Virtual address", base.HEX),
    rkey = ProtoField.uint32("mrc.reth.rkey", "R_Key", base.HEX),
    dlen = ProtoField.uint32("mrc.reth.dlen", "DMA length", base.DEC),
    msg_id = ProtoField.uint32("mrc.data.msg_id", "Message id", base.DEC),
    dflags = ProtoField.uint16("mrc.data.flags", "Flags", base.HEX),
    retx = ProtoField.bool("mrc.data.flags.retransmission", "Retransmission", 16, nil, 0x0001),
    last = ProtoField.bool("mrc.data.flags.last", "Last of message", 16, nil, 0x0002),
    ack_echo = ProtoField.uint16("mrc.data.ack_echo", "ACK echo (latest SACK received, 0: none)", base.DEC, nil, 0xFFFC),
    hdr_check = ProtoField.uint16("mrc.data.hdr_check", "Header check (for trims)", base.HEX),
    send_ts = ProtoField.uint64("mrc.data.send_ts", "Send timestamp (ns)", base.DEC),
    payload_len = ProtoField.uint32("mrc.data.payload_len", "Payload length", base.DEC),
    trimmed = ProtoField.bool("mrc.data.trimmed", "Trimmed by a switch"),
    -- SACK
    cum_psn = ProtoField.uint24("mrc.sack.cum_psn", "Cumulative PSN", base.DEC),
    base_psn = ProtoField.uint24("mrc.sack.base_psn", "Bitmap base PSN", base.DEC),
    bitmap = ProtoField.uint64("mrc.sack.bitmap", "SACK bitmap", base.HEX),
    sack_echo_ev = ProtoField.uint32("mrc.sack.echo_ev", "Echoed EV", base.HEX),
    sflags = ProtoField.uint8("mrc.sack.flags", "Flags", base.HEX),
    ecn_echo = ProtoField.bool("mrc.sack.ecn_echo", "ECN echo", 8, nil, 0x01),
    sack_dup = ProtoField.bool("mrc.sack.duplicate", "Duplicate (D-SACK)", 8, nil, 0x02),
    sack_ports = ProtoField.uint16("mrc.sack.port_status", "Port status", base.HEX),
    sack_echo_ts = ProtoField.uint64("mrc.sack.echo_ts", "Echoed timestamp (ns)", base.DEC),
    -- NACK
    nack_psn = ProtoField.uint24("mrc.nack.psn", "PSN", base.DEC),
    nack_reason = ProtoField.uint8("mrc.nack.reason", "Reason", base.DEC, NACK_REASONS),
    nack_echo_ev = ProtoField.uint32("mrc.nack.echo_ev", "Echoed EV", base.HEX),
    -- PROBE / PROBE_ACK
    probe_id = ProtoField.uint32("mrc.probe.id", "Probe id", base.DEC),
    ev_under_test = ProtoField.uint32("mrc.probe.ev_under_test", "EV under test", base.HEX),
    probe_ts = ProtoField.uint64("mrc.probe.send_ts", "Send timestamp (ns)", base.DEC),
    reply_ev = ProtoField.uint32("mrc.probe.reply_ev", "Reply EV", base.HEX),
    pack_ts = ProtoField.uint64("mrc.probe_ack.echo_ts", "Echoed timestamp (ns)", base.DEC),
    pack_ports = ProtoField.uint16("mrc.probe_ack.port_status", "Port status", base.HEX),
    -- CONNECT / CONNECT_ACK
    initial_psn = ProtoField.uint24("mrc.connect.initial_psn", "Initial PSN", base.DEC),
    nonce = ProtoField.uint64("mrc.connect.nonce", "Nonce", base.HEX),
    cstatus = ProtoField.uint8("mrc.connect.status", "Status", base.DEC, CONNECT_STATUS),
    crkey = ProtoField.uint32("mrc.connect.rkey", "R_Key", base.HEX),
    cookie = ProtoField.uint32("mrc.connect.cookie", "Cookie", base.HEX),
    -- CREDIT / CREDIT_REQUEST (cumulative payload bytes, modulo 2^32)
    granted = ProtoField.uint32("mrc.credit.granted", "Credit granted (bytes, cumulative)", base.DEC),
    target = ProtoField.uint32("mrc.credit.target", "Credit wanted (bytes, cumulative)", base.DEC),
    icrc = ProtoField.uint32("mrc.icrc", "ICRC (little-endian)", base.HEX),
    -- the outer destination, read as a uSID carrier
    carrier = ProtoField.ipv6("mrc.carrier", "uSID carrier (outer destination)"),
    block = ProtoField.string("mrc.carrier.block", "Locator block"),
    usid = ProtoField.uint16("mrc.carrier.usid", "uSID", base.HEX),
}
mrc.fields = f

local e_length = ProtoExpert.new("mrc.bad_length", "MRC header length does not match the opcode",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_sport = ProtoExpert.new("mrc.bad_sport", "UDP source port outside 0xC000-0xFFFF carries no EV",
    expert.group.PROTOCOL, expert.severity.WARN)
local e_opcode = ProtoExpert.new("mrc.unknown_opcode", "BTH opcode MRC does not use",
    expert.group.UNDECODED, expert.severity.WARN)
mrc.experts = { e_length, e_sport, e_opcode }

local ipv6_flow = Field.new("ipv6.flow")
local ipv6_dst = Field.new("ipv6.dst")
local ipv6_dscp = Field.new("ipv6.tclass.dscp")
local udp_srcport = Field.new("udp.srcport")

local CTRL_LEN = {
    [0xC0] = 32, [0xC1] = 12, [0xC2] = 20, [0xC3] = 20, [0xC4] = 16, [0xC5] = 16, [0xC6] = 4, [0xC7] = 4,
}
local BTH_LEN, DATA_HDR_LEN, ICRC_LEN = 12, 32, 4

-- the protocol that had UDP 4791 before (Wireshark's RoCEv2/InfiniBand), called first
local udp_table = DissectorTable.get("udp.port")
local rroce = udp_table:get_dissector(4791)

-- an EV (the packet's own, or one echoed) with its plane / T1 / entropy fields beneath it
local function add_ev(tree, field, range, value)
    local t = tree:add(field, range, value)
    t:add(f.ev_plane, range, math.floor(value / 2 ^ 28))
    t:add(f.ev_t1, range, math.floor(value / 2 ^ 18) % 1024)
    t:add(f.ev_entropy, range, value % 2 ^ 18)
    return t
end

-- the outer destination: the locator block (/32), then the uSIDs still to come, each with its
-- tier / plane / index (docs/addressing.md); a zero uSID ends the carrier
local USID_TIERS = { [1] = "T0", [2] = "T1", [3] = "host" }
local HOST_FUNCTIONS = { [4] = "decapsulate IPv4 (kernel traffic)", [6] = "decapsulate IPv6 (kernel traffic)" }

local function add_carrier(tree)
    local dsts = { ipv6_dst() }
    if #dsts == 0 then
        return
    end
    local r = dsts[1].range -- the outer header's (the first IPv6 destination of the frame)
    local c = tree:add(f.carrier, r)
    c:add(f.block, r(0, 4), string.format("%x:%x::/32", r(0, 2):uint(), r(2, 2):uint()))
    for i = 0, 5 do
        local u = r(4 + 2 * i, 2):uint()
        if u == 0 then
            break
        end
        local tier = math.floor(u / 2 ^ 14)
        local item = c:add(f.usid, r(4 + 2 * i, 2))
        if tier == 0 then
            item:append_text(": " .. (HOST_FUNCTIONS[u] or "host function?"))
        else
            item:append_text(string.format(": %s plane %d index %d", USID_TIERS[tier],
                math.floor(u / 2 ^ 10) % 16, u % 1024))
        end
    end
end

function mrc.dissector(tvb, pinfo, tree)
    local n = tvb:len()
    -- the MRC tree first, so that it comes before InfiniBand's (which ends in a payload dump)
    local t = nil
    if n >= BTH_LEN then
        t = tree:add(mrc, tvb(), "MRC")
    end
    if rroce ~= nil then
        rroce:call(tvb, pinfo, tree)
    end
    if t == nil then
        return
    end
    local op = tvb(0, 1):uint()
    add_carrier(t)
    t:add(f.opcode, tvb(0, 1))
    t:add(f.qp, tvb(5, 3))
    t:add(f.psn, tvb(9, 3))

    -- EV: low 14 bits in the UDP source port, high 18 in the flow label (the last IPv6 header's)
    local sports = { udp_srcport() }
    local flows = { ipv6_flow() }
    if #sports > 0 and #flows > 0 then
        local sport = sports[#sports].value
        local fl = flows[#flows].value
        if sport < 0xC000 then
            t:add_proto_expert_info(e_sport)
        end
        add_ev(t, f.ev, tvb(0, 0), (fl % 2 ^ 18) * 2 ^ 14 + sport % 2 ^ 14):set_generated()
    end
    local dscps = { ipv6_dscp() }
    local dscp = nil
    if #dscps > 0 then
        dscp = dscps[1].value
        t:add(f.class, tvb(0, 0), DSCP_CLASSES[dscp] or "other"):set_generated()
    end

    local h = BTH_LEN
    local name = OP_NAMES[op]
    local info
    if op == 0x06 or op == 0x07 or op == 0x08 or op == 0x0A then
        if n < h + DATA_HDR_LEN then
            t:add_proto_expert_info(e_length)
            return
        end
        local dlen = tvb(h + 12, 4):uint()
        t:add(f.va, tvb(h, 8))
        t:add(f.rkey, tvb(h + 8, 4))
        t:add(f.dlen, tvb(h + 12, 4))
        t:add(f.msg_id, tvb(h + 16, 4))
        local fl = t:add(f.dflags, tvb(h + 20, 2))
        fl:add(f.retx, tvb(h + 20, 2))
        fl:add(f.last, tvb(h + 20, 2))
        fl:add(f.ack_echo, tvb(h + 20, 2))
        t:add(f.hdr_check, tvb(h + 22, 2))
        t:add(f.send_ts, tvb(h + 24, 8))
        local have = n - h - DATA_HDR_LEN
        local trimmed = dscp == 46 or have < dlen + ICRC_LEN
        t:add(f.trimmed, tvb(0, 0), trimmed):set_generated()
        if trimmed then
            t:add(f.payload_len, tvb(0, 0), 0):set_generated()
        elseif have ~= dlen + ICRC_LEN then
            t:add_proto_expert_info(e_length)
        else
            t:add(f.payload_len, tvb(h + DATA_HDR_LEN, dlen), dlen)
            t:add_le(f.icrc, tvb(n - ICRC_LEN, 4))
        end
        info = string.format("MRC %s psn=%d msg=%d len=%d%s", name, tvb(9, 3):uint(), tvb(h + 16, 4):uint(),
            dlen, trimmed and " TRIMMED" or "")
    elseif CTRL_LEN[op] ~= nil then
        if n ~= h + CTRL_LEN[op] + ICRC_LEN then
            t:add_proto_expert_info(e_length)
            return
        end
        if op == 0xC0 then
            t:add(f.cum_psn, tvb(h + 1, 3))
            t:add(f.base_psn, tvb(h + 5, 3))
            t:add(f.bitmap, tvb(h + 8, 8))
            add_ev(t, f.sack_echo_ev, tvb(h + 16, 4), tvb(h + 16, 4):uint())
            local sf = t:add(f.sflags, tvb(h + 20, 1))
            sf:add(f.ecn_echo, tvb(h + 20, 1))
            sf:add(f.sack_dup, tvb(h + 20, 1))
            t:add(f.sack_ports, tvb(h + 22, 2))
            t:add(f.sack_echo_ts, tvb(h + 24, 8))
            info = string.format("MRC SACK cum=%d base=%d bitmap=0x%s%s%s", tvb(h + 1, 3):uint(),
                tvb(h + 5, 3):uint(), tostring(tvb(h + 8, 8):bytes():tohex()),
                (tvb(h + 20, 1):uint() % 2 == 1) and " ECE" or "",
                (math.floor(tvb(h + 20, 1):uint() / 2) % 2 == 1) and " DUP" or "")
        elseif op == 0xC1 then
            t:add(f.nack_psn, tvb(h + 1, 3))
            t:add(f.nack_reason, tvb(h + 4, 1))
            add_ev(t, f.nack_echo_ev, tvb(h + 8, 4), tvb(h + 8, 4):uint())
            info = string.format("MRC NACK psn=%d %s", tvb(h + 1, 3):uint(),
                NACK_REASONS[tvb(h + 4, 1):uint()] or "reason?")
        elseif op == 0xC2 then
            t:add(f.probe_id, tvb(h, 4))
            t:add(f.ev_under_test, tvb(h + 4, 4))
            t:add(f.probe_ts, tvb(h + 8, 8))
            t:add(f.reply_ev, tvb(h + 16, 4))
            info = string.format("MRC PROBE id=%d ev=%08x", tvb(h, 4):uint(), tvb(h + 4, 4):uint())
        elseif op == 0xC3 then
            t:add(f.probe_id, tvb(h, 4))
            t:add(f.ev_under_test, tvb(h + 4, 4))
            t:add(f.pack_ts, tvb(h + 8, 8))
            t:add(f.pack_ports, tvb(h + 16, 2))
            info = string.format("MRC PROBE_ACK id=%d ev=%08x", tvb(h, 4):uint(), tvb(h + 4, 4):uint())
        elseif op == 0xC6 then
            t:add(f.granted, tvb(h, 4))
            info = string.format("MRC CREDIT granted=%d", tvb(h, 4):uint())
        elseif op == 0xC7 then
            t:add(f.target, tvb(h, 4))
            info = string.format("MRC CREDIT_REQUEST target=%d", tvb(h, 4):uint())
        elseif op == 0xC4 then
            t:add(f.initial_psn, tvb(h + 1, 3))
            t:add(f.cookie, tvb(h + 4, 4))
            t:add(f.nonce, tvb(h + 8, 8))
            info = string.format("MRC CONNECT initial_psn=%d%s", tvb(h + 1, 3):uint(),
                tvb(h + 4, 4):uint() ~= 0 and " with the receiver's cookie" or "")
        else
            t:add(f.cstatus, tvb(h, 1))
            t:add(f.initial_psn, tvb(h + 1, 3))
            -- a RETRY carries the cookie where an answer that accepts (or a RESET) carries the rkey
            t:add(tvb(h, 1):uint() == 2 and f.cookie or f.crkey, tvb(h + 4, 4))
            t:add(f.nonce, tvb(h + 8, 8))
            info = string.format("MRC CONNECT_ACK %s initial_psn=%d", CONNECT_STATUS[tvb(h, 1):uint()] or "?",
                tvb(h + 1, 3):uint())
            if tvb(h, 1):uint() == 2 then
                -- every first CONNECT gets one: the receiver keeps no state until its cookie comes back
                info = info .. " (stateless cookie, as TCP SYN cookies: the sender repeats its CONNECT with it)"
            end
        end
        t:add_le(f.icrc, tvb(n - ICRC_LEN, 4))
    else
        t:add_proto_expert_info(e_opcode)
        return
    end
    pinfo.cols.protocol = "MRC"
    pinfo.cols.info = string.format("%s QP=0x%06x", info, tvb(5, 3):uint())
end

udp_table:add(4791, mrc)
