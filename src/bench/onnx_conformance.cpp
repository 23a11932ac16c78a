#include "bench/onnx_conformance.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <span>

#include <onnx/onnx_pb.h>

#include "compiler/compile.h"
#include "frontend/onnx/context.h"
#include "frontend/onnx/import.h"
#include "ir/verifier.h"
#include "reference/interpreter.h"
#include "support/timing.h"
#include "tensorjit/error.h"

namespace tj::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Case {
  std::string name, op;
  double rtol = 1e-3, atol = 1e-7;
  bool expanded = false;
};

struct Outcome {
  std::string status = "crashed";  // passed, failed, unsupported, crashed, timeout
  std::string detail;
};

NDArray read_tensor(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot open " + p.string());
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) throw Error(p.string() + ": not a TensorProto");
  return onnx_import::tensor_value(t, p.filename().string());
}

// numpy.testing.assert_allclose, as the suite checks: same shape and dtype,
// |got - want| <= atol + rtol * |want|, NaN where NaN is expected.
std::string mismatch(const NDArray& want, const NDArray& got, const Case& c) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape()) return "got " + got.type_str() + ", expected " + want.type_str();
  bool exact = !is_float(want.dtype());
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < want.numel(); ++k) {
    double w = want.get(k), g = got.get(k);
    bool ok = exact ? w == g
              : std::isnan(w)              ? std::isnan(g)
              : std::isinf(w)              ? w == g
                                           : std::fabs(g - w) <= c.atol + c.rtol * std::fabs(w);
    if (!ok && bad++ == 0) first = k;
  }
  if (bad == 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld of %lld elements differ (first at %lld: got %.9g, expected %.9g)", (long long)bad,
                (long long)want.numel(), (long long)first, got.get(first), want.get(first));
  return buf;
}

// `a` in dtype `to` (the interpreter computes floats in f32 or f64).
NDArray in_dtype(NDArray a, DType to) {
  if (a.dtype() == to) return a;
  NDArray r(to, a.shape());
  for (int64_t k = 0; k < a.numel(); ++k) r.set(k, a.get(k));
  return r;
}

// A data set: the graph's inputs (and the known ones, by name) and the
// expected outputs.
struct DataSet {
  Bindings inputs;
  std::vector<NDArray> want;
};

DataSet read_set(const fs::path& set, const onnx::GraphProto& g) {
  DataSet d;
  std::set<std::string> inits;
  for (const auto& i : g.initializer()) inits.insert(i.name());
  auto tensor_typed = [](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) throw Unsupported("'" + v.name() + "' is not a tensor (a sequence, map or optional)");
  };
  int k = 0;
  for (const auto& in : g.input()) {
    fs::path p = set / ("input_" + std::to_string(k++) + ".pb");
    if (inits.count(in.name()) && !fs::exists(p)) continue;
    tensor_typed(in);
    d.inputs[in.name()] = read_tensor(p);
  }
  for (int o = 0; o < g.output_size(); ++o) {
    tensor_typed(g.output(o));
    d.want.push_back(read_tensor(set / ("output_" + std::to_string(o) + ".pb")));
  }
  return d;
}

// A case's model, read once: its bytes (imported per data set) and the
// proto (the graph's input and output types, for reading the data).
struct ModelFile {
  fs::path path;
  std::string bytes;
  onnx::ModelProto proto;
};

ModelFile read_model(const fs::path& p) {
  ModelFile m{p, {}, {}};
  std::ifstream f(p, std::ios::binary);
  m.bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) throw Error(p.string() + ": cannot read");
  if (!m.proto.ParseFromString(m.bytes)) throw Error(p.string() + ": not a valid ONNX model");
  return m;
}

onnx_import::OnnxModel import_model(const ModelFile& f, onnx_import::ImportOptions o) {
  o.base_dir = f.path.parent_path().string();
  return onnx_import::import_bytes(std::as_bytes(std::span(f.bytes.data(), f.bytes.size())), f.path.string(), o);
}

// One data set of a case, in the child: imported, interpreted, compiled.
// Models that take shapes or axes as inputs are imported again with their
// integer and bool inputs and their scalars known (a specialization on
// their values).
Outcome run_set(const ModelFile& model, const DataSet& d, const Case& c, const std::string& where, bool interpret_only, bool* specialized) {
  onnx_import::OnnxModel m;
  try {
    try {
      m = import_model(model, {});
    } catch (const onnx_import::MustBeKnown& e) {
      // deciding()'s inputs, and by the case's values any small integer, bool or scalar one.
      onnx_import::ImportOptions o;
      const std::vector<std::string> deciding = e.deciding();
      for (const auto& [name, a] : d.inputs)
        if (std::find(deciding.begin(), deciding.end(), name) != deciding.end() || (is_int(a.dtype()) && a.numel() <= 4096) ||
            a.dtype() == DType::boolean || a.numel() == 1)
          o.known_inputs[name] = a;
      m = import_model(model, std::move(o));
      *specialized = true;
    }
    verify(m.graph);
  } catch (const Unsupported& e) {
    return {"unsupported", e.what()};
  } catch (const Error& e) {
    return {"failed", std::string("import: ") + e.what()};
  }
  Bindings in = m.params;
  for (ValueId i : m.graph.inputs()) {
    auto it = d.inputs.find(m.graph.node(i).name);
    if (it == d.inputs.end()) return {"failed", "no data for input '" + m.graph.node(i).name + "'"};
    in[it->first] = it->second;
  }
  if (m.graph.outputs().size() != d.want.size()) return {"failed", "the graph has " + std::to_string(m.graph.outputs().size()) + " outputs"};
  bool f64 = false;
  for (ValueId o : m.graph.outputs()) f64 |= m.graph.type(o).dtype == DType::f64;
  for (const auto& [name, a] : in) f64 |= a.dtype() == DType::f64;
  try {
    std::vector<NDArray> got = interpret(m.graph, in, {f64 ? DType::f64 : DType::f32});
    for (size_t o = 0; o < d.want.size(); ++o)
      if (std::string e = mismatch(d.want[o], in_dtype(got[o], m.graph.type(m.graph.outputs()[o]).dtype), c); !e.empty())
        return {"failed", "interpreted, " + where + ", output " + std::to_string(o) + ": " + e};
  } catch (const Error& e) {
    return {"failed", "interpreted, " + where + ": " + e.what()};
  }
  if (interpret_only) return {"passed", ""};
  try {
    Bindings params;
    for (ValueId p : m.graph.params()) {
      params[m.graph.node(p).name] = m.params.at(m.graph.node(p).name);
      in.erase(m.graph.node(p).name);
    }
    Executable exe = tj::compile(m.graph, params);
    if (!exe.stats().compiled) throw Error("no C++ compiler found");
    std::vector<NDArray> got = exe.run(in);
    for (size_t o = 0; o < d.want.size(); ++o)
      if (std::string e = mismatch(d.want[o], got[o], c); !e.empty()) return {"failed", "compiled, " + where + ", output " + std::to_string(o) + ": " + e};
  } catch (const Error& e) {
    return {"failed", "compiled, " + where + ": " + e.what()};
  }
  return {"passed", ""};
}

Outcome run_case(const fs::path& dir, const Case& c, bool interpret_only) {
  ModelFile model;
  try {
    model = read_model(dir / "model.onnx");
  } catch (const Error& e) {
    return {"failed", e.what()};
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  bool specialized = false;
  for (const fs::path& set : sets) {
    DataSet d;
    try {
      d = read_set(set, model.proto.graph());
    } catch (const Unsupported& e) {
      return {"unsupported", e.what()};
    } catch (const Error& e) {
      return {"failed", e.what()};
    }
    Outcome r = run_set(model, d, c, set.filename().string(), interpret_only, &specialized);
    if (r.status != "passed") return r;
  }
  return {"passed", specialized ? "shape operands known at import" : ""};
}

std::vector<Case> read_manifest(const fs::path& dir) {
  fs::path p = dir / "manifest.json";
  std::ifstream f(p);
  if (!f) throw Error("onnx-conformance: no " + p.string() + " (write the cases with scripts/onnx-testdata)");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw Error("onnx-conformance: " + p.string() + ": " + e.what());
  }
  std::vector<Case> cases;
  try {
    for (const auto& e : j.at("cases"))
      cases.push_back({e.at("name").get<std::string>(), e.at("op").get<std::string>(), e.at("rtol").get<double>(), e.at("atol").get<double>(),
                       e.value("expanded", false)});
  } catch (const json::exception& e) {
    throw Error("onnx-conformance: " + p.string() + ": " + e.what());
  }
  return cases;
}

struct Child {
  pid_t pid;
  int fd;
  size_t index;
  std::string out;
  Clock::time_point start;
};

// The children: each runs one case and writes its outcome as JSON to a pipe.
std::vector<Outcome> run_all(const fs::path& dir, const std::vector<Case>& cases, const ConformanceOptions& a) {
  std::vector<Outcome> results(cases.size());
  std::vector<Child> running;
  size_t next = 0, done = 0;
  const auto t0 = Clock::now();
  auto finish = [&](Child& ch, int status) {
    Outcome& r = results[ch.index];
    try {
      json j = json::parse(ch.out);
      r = {j.at("status").get<std::string>(), j.at("detail").get<std::string>()};
    } catch (const json::exception&) {
      r = {"crashed", WIFSIGNALED(status) ? std::string("signal ") + strsignal(WTERMSIG(status)) : "exit " + std::to_string(WEXITSTATUS(status))};
    }
    ++done;
    if (a.verbose || r.status == "crashed" || r.status == "timeout")
      std::fprintf(stderr, "%-8s %s %s\n", r.status.c_str(), cases[ch.index].name.c_str(), r.detail.c_str());
    if (done % 100 == 0 || done == cases.size())
      std::fprintf(stderr, "onnx-conformance: %zu/%zu cases, %.0f s\n", done, cases.size(), seconds_since(t0));
  };
  while (done < cases.size()) {
    while (running.size() < static_cast<size_t>(a.jobs) && next < cases.size()) {
      int p[2];
      if (pipe(p) != 0) throw Error("onnx-conformance: pipe failed");
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid < 0) throw Error("onnx-conformance: fork failed");
      if (pid == 0) {
        close(p[0]);
        Outcome r;
        try {
          r = run_case(dir / cases[next].name, cases[next], a.interpret_only);
        } catch (const std::exception& e) {
          r = {"failed", std::string("error: ") + e.what()};
        }
        std::string s = json{{"status", r.status}, {"detail", r.detail.substr(0, 400)}}.dump();
        for (size_t off = 0; off < s.size();) {
          ssize_t w = write(p[1], s.data() + off, s.size() - off);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
        _exit(0);
      }
      close(p[1]);
      running.push_back({pid, p[0], next++, "", Clock::now()});
    }
    std::vector<pollfd> fds;
    for (const Child& ch : running) fds.push_back({ch.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 500);
    for (size_t i = 0; i < running.size();) {
      Child& ch = running[i];
      bool closed = false;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(ch.fd, buf, sizeof buf);
        if (n > 0) ch.out.append(buf, static_cast<size_t>(n));
        else closed = true;
      }
      bool late = seconds_since(ch.start) > a.timeout;
      if (late && !closed) kill(ch.pid, SIGKILL);
      if (closed || late) {
        int status = 0;
        waitpid(ch.pid, &status, 0);
        close(ch.fd);
        if (late && !closed) {
          results[ch.index] = {"timeout", "over " + std::to_string(static_cast<int>(a.timeout)) + " s"};
          ++done;
          std::fprintf(stderr, "timeout  %s\n", cases[ch.index].name.c_str());
        } else {
          finish(ch, status);
        }
        fds.erase(fds.begin() + static_cast<long>(i));
        running.erase(running.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
  return results;
}

struct Tally {
  int passed = 0, failed = 0, unsupported = 0, broken = 0;  // broken: crashed or timed out
  int total() const { return passed + failed + unsupported + broken; }
  void add(const std::string& s) { (s == "passed" ? passed : s == "failed" ? failed : s == "unsupported" ? unsupported : broken)++; }
};

}  // namespace

void run_onnx_conformance(const ConformanceOptions& a) {
  fs::path dir = a.dir;
  std::vector<Case> all = read_manifest(dir), cases;
  std::regex re;
  try {
    re = std::regex(a.filter.empty() ? ".*" : a.filter);
  } catch (const std::regex_error& e) {
    throw Error("--filter: '" + a.filter + "' is not a regular expression: " + e.what());
  }
  for (const Case& c : all)
    if (std::regex_search(c.name, re) || std::regex_search(c.op, re)) cases.push_back(c);
  if (cases.empty()) throw Error("onnx-conformance: no case matches --filter '" + a.filter + "'");
  std::vector<Outcome> results = run_all(dir, cases, a);
  std::map<std::string, Tally> by_op;
  Tally total;
  for (size_t i = 0; i < cases.size(); ++i) {
    by_op[cases[i].op].add(results[i].status);
    total.add(results[i].status);
  }
  std::printf("%-28s %6s %6s %6s %6s %6s\n", "op", "cases", "passed", "failed", "unsup", "crash");
  for (const auto& [op, t] : by_op)
    std::printf("%-28s %6d %6d %6d %6d %6d\n", op.c_str(), t.total(), t.passed, t.failed, t.unsupported, t.broken);
  std::printf("%-28s %6d %6d %6d %6d %6d\n", "total", total.total(), total.passed, total.failed, total.unsupported, total.broken);
  if (!a.json_out.empty()) {
    json j = json::array();
    for (size_t i = 0; i < cases.size(); ++i)
      j.push_back({{"name", cases[i].name}, {"op", cases[i].op}, {"status", results[i].status}, {"detail", results[i].detail}});
    std::ofstream f(a.json_out);
    if (!(f << j.dump(1) << "\n")) throw Error("--json: cannot write " + a.json_out);
  }
  if (!a.markdown.empty()) {
    std::ofstream f(a.markdown);
    f << "| op | cases | passed | failed | unsupported |\n|---|---:|---:|---:|---:|\n";
    for (const auto& [op, t] : by_op) f << "| " << op << " | " << t.total() << " | " << t.passed << " | " << t.failed << " | " << t.unsupported << " |\n";
    f << "| **total** | " << total.total() << " | " << total.passed << " | " << total.failed << " | " << total.unsupported << " |\n";
    if (!f) throw Error("--markdown: cannot write " + a.markdown);
  }
  if (!a.require.empty()) {
    std::ifstream f(a.require);
    if (!f) throw Error("--require: cannot read " + a.require);
    std::map<std::string, const Outcome*> by_name;
    for (size_t i = 0; i < cases.size(); ++i) by_name[cases[i].name] = &results[i];
    int missing = 0, checked = 0;
    for (std::string line; std::getline(f, line);) {
      if (line.empty() || line[0] == '#') continue;
      auto it = by_name.find(line);
      if (it == by_name.end()) {
        if (a.filter.empty()) std::fprintf(stderr, "required case %s: not in the suite\n", line.c_str()), ++missing;
        continue;
      }
      ++checked;
      if (it->second->status != "passed") {
        std::fprintf(stderr, "required case %s: %s %s\n", line.c_str(), it->second->status.c_str(), it->second->detail.c_str());
        ++missing;
      }
    }
    if (missing > 0) throw Error("onnx-conformance: " + std::to_string(missing) + " of the cases " + a.require + " requires did not pass");
    std::fprintf(stderr, "onnx-conformance: all %d required cases passed\n", checked);
  }
  if (total.broken > 0) throw Error("onnx-conformance: " + std::to_string(total.broken) + " case(s) crashed or timed out");
}

}  // namespace tj::bench
