// railbed's packet backend: the C++ side, compiled once per process by cppyy (simulator/packet/engine.py).
//
// ns-3 runs the packets; Python (the Dispatcher and the scheduler) decides. ns-3 never calls Python:
// a timer that ends or a flow whose receiver has every byte is appended to g_done and stops the
// simulator (Simulator::Stop ends Run after the current event), so Run() returns to Python, which
// reads g_done, asks the Dispatcher, and carries out its actions here before running on.
//
// Addresses (railbed_packet::Address in engine.py): 10.0.0.0/8 with bits 18..23 the spine slot
// (0: same leaf, p + 1: through spine p), bits 10..17 the leaf, bits 0..9 the leaf's host port + 1.
// A host NIC holds one address per slot; a flow sends to the slot of the spine ECMP chose and from
// its own address of that slot, so its ACKs come back through the same spine. RailRouting forwards
// by decoding the destination (O(1) per packet): a leaf sends its own leaf's addresses down the
// port, others up to the slot's spine; a spine down to the leaf.

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace railbed_packet
{
using namespace ns3;

const uint16_t kPort = 7000;
const uint32_t kMss = 1448;
const uint32_t kWrite = 65536; // bytes handed to a socket per Send

// ------------------------------------------------------------------ what ended, for Python
struct Done
{
    int kind; // 0: a wait (timer), 1: a flow's receiver has every byte
    int64_t key;
};

std::vector<Done> g_done;

void Report(int kind, int64_t key)
{
    g_done.push_back({kind, key});
    Simulator::Stop();
}

// ------------------------------------------------------------------ routing
inline uint32_t SlotOf(uint32_t a) { return (a >> 18) & 63; }
inline uint32_t LeafOf(uint32_t a) { return (a >> 10) & 255; }
inline uint32_t PortOf(uint32_t a) { return (a & 1023) - 1; }

class RailRouting : public Ipv4RoutingProtocol
{
  public:
    int role = 0; // 0 host, 1 leaf (or rail, or the single switch), 2 spine
    uint32_t leaf = 0;
    std::vector<int32_t> down; // leaf: host port -> interface; spine: leaf -> interface
    std::vector<int32_t> up;   // leaf: spine -> interface
    Ptr<Ipv4> ipv4;
    uint64_t unroutable = 0;

    int32_t OutInterface(Ipv4Address dst) const
    {
        uint32_t a = dst.Get();
        if ((a >> 24) != 10)
            return -1;
        if (role == 2)
        {
            uint32_t l = LeafOf(a);
            return l < down.size() ? down[l] : -1;
        }
        if (role == 1)
        {
            if (LeafOf(a) == leaf)
            {
                uint32_t k = PortOf(a);
                return k < down.size() ? down[k] : -1;
            }
            uint32_t s = SlotOf(a);
            return (s >= 1 && s - 1 < up.size()) ? up[s - 1] : -1;
        }
        return -1;
    }

    // The interface's address of spine slot `slot` (a host NIC has one per slot), else its first.
    Ipv4Address SlotAddress(int32_t iface, uint32_t slot) const
    {
        for (uint32_t j = 0; j < ipv4->GetNAddresses(iface); j++)
        {
            Ipv4Address a = ipv4->GetAddress(iface, j).GetLocal();
            if ((a.Get() >> 24) == 10 && SlotOf(a.Get()) == slot)
                return a;
        }
        return ipv4->GetAddress(iface, 0).GetLocal();
    }

    Ptr<Ipv4Route> MakeRoute(Ipv4Address src, Ipv4Address dst, int32_t iface) const
    {
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(dst);
        r->SetSource(src);
        r->SetGateway(Ipv4Address("0.0.0.0"));
        r->SetOutputDevice(ipv4->GetNetDevice(iface));
        return r;
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& h,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& err) override
    {
        // TCP asks once without a source (SetupEndpoint: the answer's source becomes the
        // socket's local address), then with it for every packet
        Ipv4Address src = h.GetSource();
        bool known = src.IsInitialized() && src != Ipv4Address::GetAny() && ipv4->GetInterfaceForAddress(src) >= 0;
        int32_t iface = -1;
        if (role == 0)
        {
            if (oif)
                iface = ipv4->GetInterfaceForDevice(oif);
            else if (known)
                iface = ipv4->GetInterfaceForAddress(src);
            if (iface < 1 && ipv4->GetNInterfaces() > 1)
                iface = 1;
        }
        else
        {
            iface = OutInterface(h.GetDestination());
        }
        if (iface < 1)
        {
            err = Socket::ERROR_NOROUTETOHOST;
            return nullptr;
        }
        if (!known)
            src = SlotAddress(iface, SlotOf(h.GetDestination().Get()));
        err = Socket::ERROR_NOTERROR;
        return MakeRoute(src, h.GetDestination(), iface);
    }

    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& h,
                    Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb,
                    const ErrorCallback& ecb) override
    {
        int32_t iif = ipv4->GetInterfaceForDevice(idev);
        if (ipv4->IsDestinationAddress(h.GetDestination(), iif))
        {
            if (lcb.IsNull())
                return false;
            lcb(p, h, iif);
            return true;
        }
        int32_t iface = role == 0 ? -1 : OutInterface(h.GetDestination());
        if (iface < 1)
        {
            unroutable++;
            return false;
        }
        ucb(MakeRoute(h.GetSource(), h.GetDestination(), iface), p, h);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}
    void NotifyInterfaceDown(uint32_t) override {}
    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void SetIpv4(Ptr<Ipv4> ip) override { ipv4 = ip; }
    void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override {}
};

// ------------------------------------------------------------------ strict priority by DSCP
// Band 0 is served first (PrioQueueDisc). Pure TCP ACKs (IP length < 128 bytes) go to band 0, as
// the emulator's ACK class (tc_policies/plan.py); a packet of class c (the policy's DSCP table)
// to band 7 - c.
class DscpFilter : public Ipv4PacketFilter
{
  public:
    int32_t band[64] = {0};
    uint32_t ackBelow = 128;

    int32_t DoClassify(Ptr<QueueDiscItem> item) const override
    {
        Ptr<Ipv4QueueDiscItem> ip = DynamicCast<Ipv4QueueDiscItem>(item);
        if (!ip)
            return PacketFilter::PF_NO_MATCH;
        const Ipv4Header& h = ip->GetHeader();
        if (h.GetProtocol() == 6 && h.GetPayloadSize() + h.GetSerializedSize() < ackBelow)
            return 0;
        return band[h.GetTos() >> 2];
    }
};

// ------------------------------------------------------------------ ports (egress queues)
struct Port
{
    Ptr<NetDevice> dev;
    Ptr<QueueDisc> qd;
    uint32_t node = 0;
    int32_t iface = 0;
    uint32_t peakPackets = 0;
    uint32_t peakBytes = 0;
};

std::vector<Port> g_ports;
std::vector<Ptr<Node>> g_nodes;
std::vector<Ptr<RailRouting>> g_routing;
int32_t g_band[64] = {0};

void OnPackets(uint32_t port, uint32_t, uint32_t now)
{
    if (now > g_ports[port].peakPackets)
        g_ports[port].peakPackets = now;
}

void OnBytes(uint32_t port, uint32_t, uint32_t now)
{
    if (now > g_ports[port].peakBytes)
        g_ports[port].peakBytes = now;
}

void SetBand(uint32_t dscp, int32_t band) { g_band[dscp] = band; }

// A root PrioQueueDisc of 8 bands, each a drop-tail FIFO of `limit` packets (or RED marking ECN
// at `ecnK` packets when ecnK > 0), the DSCP filter in front.
Ptr<QueueDisc> InstallQueue(Ptr<NetDevice> dev, uint32_t limit, uint32_t ecnK)
{
    TrafficControlHelper tch;
    uint16_t h = tch.SetRootQueueDisc("ns3::PrioQueueDisc");
    TrafficControlHelper::ClassIdList cls = tch.AddQueueDiscClasses(h, 8, "ns3::QueueDiscClass");
    std::string size = std::to_string(limit) + "p";
    for (uint16_t c = 0; c < 8; c++)
    {
        if (ecnK > 0)
            tch.AddChildQueueDisc(h, cls[c], "ns3::RedQueueDisc",
                                  "MaxSize", QueueSizeValue(QueueSize(size)),
                                  "MinTh", DoubleValue(ecnK), "MaxTh", DoubleValue(ecnK),
                                  "UseEcn", BooleanValue(true), "UseHardDrop", BooleanValue(false),
                                  "QW", DoubleValue(1.0), "Gentle", BooleanValue(false));
        else
            tch.AddChildQueueDisc(h, cls[c], "ns3::FifoQueueDisc", "MaxSize", QueueSizeValue(QueueSize(size)));
    }
    QueueDiscContainer qds = tch.Install(dev);
    Ptr<DscpFilter> f = CreateObject<DscpFilter>();
    std::copy(g_band, g_band + 64, f->band);
    qds.Get(0)->AddPacketFilter(f);
    return qds.Get(0);
}

uint32_t AddNodes(uint32_t n)
{
    NodeContainer nodes;
    nodes.Create(n);
    InternetStackHelper stack;
    stack.Install(nodes);
    for (uint32_t i = 0; i < n; i++)
    {
        g_nodes.push_back(nodes.Get(i));
        Ptr<RailRouting> r = CreateObject<RailRouting>();
        nodes.Get(i)->GetObject<Ipv4>()->SetRoutingProtocol(r);
        g_routing.push_back(r);
    }
    return g_nodes.size();
}

int32_t AddPortSide(Ptr<NetDevice> dev, uint32_t node, uint32_t infra, uint32_t limit, uint32_t ecnK)
{
    Ptr<Ipv4> ipv4 = g_nodes[node]->GetObject<Ipv4>();
    int32_t iface = ipv4->AddInterface(dev);
    ipv4->AddAddress(iface, Ipv4InterfaceAddress(Ipv4Address(infra), Ipv4Mask("255.255.255.255")));
    ipv4->SetUp(iface);
    Port port;
    port.dev = dev;
    port.node = node;
    port.iface = iface;
    port.qd = InstallQueue(dev, limit, ecnK);
    uint32_t index = g_ports.size();
    g_ports.push_back(port);
    g_ports[index].qd->TraceConnectWithoutContext("PacketsInQueue", MakeBoundCallback(&OnPackets, index));
    g_ports[index].qd->TraceConnectWithoutContext("BytesInQueue", MakeBoundCallback(&OnBytes, index));
    return iface;
}

// A full-duplex link: two ports (a's, then b's), each with its queue; `infraA`/`infraB` are
// the interfaces' own addresses (outside 10/8: only the host NICs' slot addresses route).
void AddLink(uint32_t a, uint32_t b, double rateBps, double delay, uint32_t infraA, uint32_t infraB,
             uint32_t limitA, uint32_t limitB, uint32_t ecnK, uint32_t mtu)
{
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(uint64_t(rateBps))));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(mtu));
    p2p.SetChannelAttribute("Delay", TimeValue(Seconds(delay)));
    p2p.SetQueue("ns3::DropTailQueue", "MaxSize", QueueSizeValue(QueueSize("1p")));
    NetDeviceContainer devs = p2p.Install(g_nodes[a], g_nodes[b]);
    AddPortSide(devs.Get(0), a, infraA, limitA, ecnK);
    AddPortSide(devs.Get(1), b, infraB, limitB, ecnK);
}

int32_t PortIface(uint32_t port) { return g_ports[port].iface; }

void AddAddress(uint32_t node, int32_t iface, uint32_t addr)
{
    g_nodes[node]->GetObject<Ipv4>()->AddAddress(iface, Ipv4InterfaceAddress(Ipv4Address(addr), Ipv4Mask("255.255.255.255")));
}

void SetRole(uint32_t node, int role, uint32_t leaf)
{
    g_routing[node]->role = role;
    g_routing[node]->leaf = leaf;
}

void SetDown(uint32_t node, uint32_t k, int32_t iface)
{
    std::vector<int32_t>& v = g_routing[node]->down;
    if (v.size() <= k)
        v.resize(k + 1, -1);
    v[k] = iface;
}

void SetUp(uint32_t node, uint32_t spine, int32_t iface)
{
    std::vector<int32_t>& v = g_routing[node]->up;
    if (v.size() <= spine)
        v.resize(spine + 1, -1);
    v[spine] = iface;
}

uint64_t Unroutable()
{
    uint64_t n = 0;
    for (auto& r : g_routing)
        n += r->unroutable;
    return n;
}

// ------------------------------------------------------------------ flows
struct Flow
{
    Ptr<Socket> tx;
    Ptr<Socket> rx;
    uint64_t size = 0;
    uint64_t sent = 0;
    uint64_t rcvd = 0;
    double pace = 0; // payload bytes/s; 0: no cap
    bool hold = false;
    bool done = false;
    double tokens = 0;
    double last = 0;
    EventId tick;
};

std::vector<Flow> g_flows;
std::map<std::pair<uint32_t, uint16_t>, int64_t> g_byPeer; // (source address, port) -> flow
uint64_t g_retx = 0;
uint64_t g_timeouts = 0;
uint64_t g_stray = 0;

void Pump(int64_t i)
{
    Flow& f = g_flows[i];
    if (f.hold || f.done || f.sent >= f.size || !f.tx)
        return;
    double now = Simulator::Now().GetSeconds();
    if (f.pace > 0)
    {
        f.tokens = std::min(f.tokens + (now - f.last) * f.pace, 2.0 * kMss);
        f.last = now;
    }
    while (f.sent < f.size)
    {
        uint64_t n = std::min<uint64_t>({f.size - f.sent, f.tx->GetTxAvailable(), kWrite});
        if (n == 0)
            return; // the socket's send callback pumps again
        if (f.pace > 0)
        {
            double want = std::min<double>(kMss, f.size - f.sent);
            if (f.tokens < want)
            {
                if (!f.tick.IsPending())
                    f.tick = Simulator::Schedule(Seconds(std::max((want - f.tokens) / f.pace, 1e-9)), &Pump, i);
                return;
            }
            n = std::min<uint64_t>(n, uint64_t(f.tokens));
        }
        int r = f.tx->Send(Create<Packet>(n));
        if (r <= 0)
            return;
        f.sent += r;
        if (f.pace > 0)
            f.tokens -= r;
    }
}

void OnSendable(int64_t i, Ptr<Socket>, uint32_t) { Pump(i); }
void OnConnected(int64_t i, Ptr<Socket>) { Pump(i); }
void OnConnectFailed(int64_t i, Ptr<Socket>) { g_stray++; }
void OnRetx(Ptr<const Packet>, const TcpHeader&, const Address&, const Address&, Ptr<const TcpSocketBase>) { g_retx++; }

void OnCongState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now)
{
    if (now == TcpSocketState::CA_LOSS)
        g_timeouts++;
}

void Finish(int64_t i)
{
    Flow& f = g_flows[i];
    f.done = true;
    f.tick.Cancel();
    f.tx->SetSendCallback(MakeNullCallback<void, Ptr<Socket>, uint32_t>());
    f.rx->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
    f.tx->Close();
    f.rx->Close();
    Report(1, i);
}

void OnRecv(int64_t i, Ptr<Socket> s)
{
    Flow& f = g_flows[i];
    Ptr<Packet> p;
    while ((p = s->Recv()))
        f.rcvd += p->GetSize();
    if (!f.done && f.rcvd >= f.size)
        Finish(i);
}

void OnAccept(Ptr<Socket> s, const Address& from)
{
    InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
    auto it = g_byPeer.find({a.GetIpv4().Get(), a.GetPort()});
    if (it == g_byPeer.end())
    {
        g_stray++;
        return;
    }
    int64_t i = it->second;
    g_byPeer.erase(it);
    g_flows[i].rx = s;
    s->SetRecvCallback(MakeBoundCallback(&OnRecv, i));
    OnRecv(i, s);
}

bool AcceptAll(Ptr<Socket>, const Address&) { return true; }

void Listen(uint32_t node)
{
    Ptr<Socket> s = Socket::CreateSocket(g_nodes[node], TcpSocketFactory::GetTypeId());
    s->Bind(InetSocketAddress(Ipv4Address::GetAny(), kPort));
    s->Listen();
    s->SetAcceptCallback(MakeCallback(&AcceptAll), MakeCallback(&OnAccept));
}

// Flow i: `size` payload bytes from `src` (bound to the node's interface `iface`) to `dst`.
void StartFlow(int64_t i, uint32_t node, int32_t iface, uint32_t src, uint32_t dst, uint64_t size, uint32_t tos,
               double pace, bool hold)
{
    if (g_flows.size() <= uint64_t(i))
        g_flows.resize(i + 1);
    Flow& f = g_flows[i];
    f.size = size;
    f.pace = pace;
    f.hold = hold;
    f.last = Simulator::Now().GetSeconds();
    Ptr<Node> n = g_nodes[node];
    Ptr<Socket> s = Socket::CreateSocket(n, TcpSocketFactory::GetTypeId());
    s->Bind(InetSocketAddress(Ipv4Address(src), 0));
    s->BindToNetDevice(n->GetObject<Ipv4>()->GetNetDevice(iface));
    s->SetIpTos(uint8_t(tos));
    Address local;
    s->GetSockName(local);
    g_byPeer[{src, InetSocketAddress::ConvertFrom(local).GetPort()}] = i;
    s->TraceConnectWithoutContext("Retransmission", MakeCallback(&OnRetx));
    s->TraceConnectWithoutContext("CongState", MakeCallback(&OnCongState));
    s->SetSendCallback(MakeBoundCallback(&OnSendable, i));
    s->SetConnectCallback(MakeBoundCallback(&OnConnected, i), MakeBoundCallback(&OnConnectFailed, i));
    f.tx = s;
    s->Connect(InetSocketAddress(Ipv4Address(dst), kPort));
}

void SetPace(int64_t i, double pace, bool hold)
{
    Flow& f = g_flows[i];
    f.tick.Cancel();
    f.tokens = std::min(f.tokens, double(kMss));
    f.last = Simulator::Now().GetSeconds();
    f.pace = pace;
    f.hold = hold;
    Pump(i);
}

void SetTos(int64_t i, uint32_t tos) { g_flows[i].tx->SetIpTos(uint8_t(tos)); }
uint64_t Received(int64_t i) { return g_flows[i].rcvd; }

// ------------------------------------------------------------------ the loop
void Later(int kind, int64_t key, double seconds) { Simulator::Schedule(Seconds(seconds), &Report, kind, key); }

// Time 0's own events: nodes, their traffic-control layers and devices initialise (a socket
// used before sends into an uninitialised layer).
void Start()
{
    Simulator::Stop(Seconds(0));
    Simulator::Run();
}

// Run until something ended (returns how many: read them with DoneKind/DoneKey) or nothing is
// left to run (0).
uint32_t RunUntilDone()
{
    g_done.clear();
    Simulator::Run(); // IsFinished() would say true here: it reads the flag the last Stop left set

    return g_done.size();
}

int DoneKind(uint32_t j) { return g_done[j].kind; }
int64_t DoneKey(uint32_t j) { return g_done[j].key; }
double Now() { return Simulator::Now().GetSeconds(); }

// ------------------------------------------------------------------ statistics
uint64_t PortDrops(uint32_t p) { return g_ports[p].qd->GetStats().nTotalDroppedPackets; }
uint64_t PortMarks(uint32_t p) { return g_ports[p].qd->GetStats().nTotalMarkedPackets; }
uint64_t PortSentBytes(uint32_t p) { return g_ports[p].qd->GetStats().nTotalSentBytes; }
uint64_t PortSentPackets(uint32_t p) { return g_ports[p].qd->GetStats().nTotalSentPackets; }
uint32_t PortPeakPackets(uint32_t p) { return g_ports[p].peakPackets; }
uint32_t PortPeakBytes(uint32_t p) { return g_ports[p].peakBytes; }
uint64_t Retransmissions() { return g_retx; }
uint64_t Timeouts() { return g_timeouts; }
uint64_t Stray() { return g_stray; }

void Reset()
{
    Simulator::Destroy();
    g_done.clear();
    g_ports.clear();
    g_nodes.clear();
    g_routing.clear();
    g_flows.clear();
    g_byPeer.clear();
    g_retx = g_timeouts = g_stray = 0;
    std::fill(g_band, g_band + 64, 0);
}

} // namespace railbed_packet
