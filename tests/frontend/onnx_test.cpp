// The ONNX importer on models built here with the protobuf API: names and
// symbolic dims kept, initializers as params, node semantics against hand
// values, and malformed or unsupported models as clear errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <onnx/onnx_pb.h>

#include "compiler/compile.h"
#include "frontend/onnx/import.h"
#include "ir/text.h"
#include "reference/interpreter.h"
#include "tensorjit/compile.h"
#include "tensorjit/error.h"
#include "tensorjit/onnx.h"

namespace tj {
namespace {

using onnx_import::OnnxModel;

onnx::ModelProto model(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void input(onnx::GraphProto* g, const std::string& name, int32_t type, const std::vector<std::string>& dims) {
  auto* v = g->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  tt->mutable_shape();  // rank 0 when dims is empty
  for (const auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

void output(onnx::GraphProto* g, const std::string& name) { g->add_output()->set_name(name); }

onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(g->node_size()));
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void floats(onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v, bool raw) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  if (raw) t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  else for (float x : v) t->add_float_data(x);
}

void ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// A Constant node `name` of the integers v.
void constant_ints(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v) {
  auto* a = node(g, "Constant", {}, {name})->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

OnnxModel import(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  return onnx_import::import_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "test.onnx");
}

// The error's message, prefixed "unsupported: " for a tj::Unsupported.
std::string error_of(const onnx::ModelProto& m) {
  try {
    import(m);
  } catch (const Unsupported& e) {
    return std::string("unsupported: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A graph attribute (If's branches, Loop's body).
onnx::GraphProto* graph_attr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

void scalar_init(onnx::TensorProto* t, const std::string& name, int32_t type, double v) {
  t->set_name(name);
  t->set_data_type(type);
  if (type == onnx::TensorProto::FLOAT) t->add_float_data(static_cast<float>(v));
  else if (type == onnx::TensorProto::BOOL) t->add_int32_data(v != 0);
  else t->add_int64_data(static_cast<int64_t>(v));
}

// Interpreted and compiled, both equal to `want` (f32 outputs).
void expect_runs(const OnnxModel& o, const Bindings& inputs, const std::vector<std::vector<float>>& want) {
  Bindings all = o.params;
  for (const auto& [k, v] : inputs) all[k] = v;
  auto interp = interpret(o.graph, all);
  Bindings given = inputs;
  auto comp = tj::compile(o.graph, o.params).run(given);
  ASSERT_EQ(interp.size(), want.size());
  ASSERT_EQ(comp.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(interp[i].numel(), static_cast<int64_t>(want[i].size()));
    ASSERT_EQ(comp[i].numel(), static_cast<int64_t>(want[i].size()));
    for (size_t k = 0; k < want[i].size(); ++k) {
      EXPECT_EQ(interp[i].get(static_cast<int64_t>(k)), want[i][k]) << "interpreted output " << i << " element " << k;
      EXPECT_EQ(comp[i].get(static_cast<int64_t>(k)), want[i][k]) << "compiled output " << i << " element " << k;
    }
  }
}

// If with a condition known only at run time becomes the IR's cond, its
// branches reading outer values (an input, an initializer); Loop becomes a
// while_loop: a condition computed by the body ends it early, the trip
// count is an input, an outer initializer is a constant of the body; scan
// outputs (a for loop of a trip count known at import) are rows written
// per iteration.
TEST(OnnxImport, IfAndLoopBecomeCondAndWhileLoop) {
  {
    auto m = model();
    auto* g = m.mutable_graph();
    input(g, "x", onnx::TensorProto::FLOAT, {"3"});
    input(g, "p", onnx::TensorProto::BOOL, {});
    floats(g->add_initializer(), "k", {3}, {1, 2, 3}, false);
    auto* n = node(g, "If", {"p"}, {"y"});
    auto* t = graph_attr(n, "then_branch");
    node(t, "Add", {"x", "k"}, {"t_y"});
    output(t, "t_y");
    auto* e = graph_attr(n, "else_branch");
    node(e, "Mul", {"x", "x"}, {"e_y"});
    output(e, "e_y");
    output(g, "y");
    OnnxModel o = import(m);
    EXPECT_NE(print_graph(o.graph).find(" = cond("), std::string::npos) << print_graph(o.graph);
    NDArray x = NDArray::of<float>({3}, std::vector<float>{0.5f, -1, 4});
    expect_runs(o, {{"x", x}, {"p", NDArray::scalar(DType::boolean, 1)}}, {{1.5f, 1, 7}});
    expect_runs(o, {{"x", x}, {"p", NDArray::scalar(DType::boolean, 0)}}, {{0.25f, 1, 16}});
    // Branches of different shapes: the IR's cond cannot hold them.
    e->mutable_node(0)->set_op_type("Concat");  // [6]
    int_attr(e->mutable_node(0), "axis", 0);
    EXPECT_NE(error_of(m).find("the branches differ"), std::string::npos) << error_of(m);
  }
  {
    // v = 2v + x while i < n and the body's condition (i < 2 after
    // iteration i) holds: min(n, 3) iterations.
    auto m = model();
    auto* g = m.mutable_graph();
    input(g, "x", onnx::TensorProto::FLOAT, {"2"});
    input(g, "n", onnx::TensorProto::INT64, {});
    scalar_init(g->add_initializer(), "go", onnx::TensorProto::BOOL, 1);
    scalar_init(g->add_initializer(), "two", onnx::TensorProto::FLOAT, 2);
    scalar_init(g->add_initializer(), "lim", onnx::TensorProto::INT64, 2);
    auto* n = node(g, "Loop", {"n", "go", "x"}, {"v"});
    auto* b = graph_attr(n, "body");
    input(b, "i", onnx::TensorProto::INT64, {});
    input(b, "c", onnx::TensorProto::BOOL, {});
    input(b, "v_in", onnx::TensorProto::FLOAT, {"2"});
    node(b, "Mul", {"v_in", "two"}, {"d"});
    node(b, "Add", {"d", "x"}, {"v_out"});
    node(b, "Less", {"i", "lim"}, {"c_out"});
    output(b, "c_out");
    output(b, "v_out");
    output(g, "v");
    OnnxModel o = import(m);
    EXPECT_NE(print_graph(o.graph).find(" = while_loop("), std::string::npos) << print_graph(o.graph);
    NDArray x = NDArray::of<float>({2}, std::vector<float>{1, -1});
    expect_runs(o, {{"x", x}, {"n", NDArray::scalar(DType::i64, 0)}}, {{1, -1}});
    expect_runs(o, {{"x", x}, {"n", NDArray::scalar(DType::i64, 2)}}, {{7, -7}});
    expect_runs(o, {{"x", x}, {"n", NDArray::scalar(DType::i64, 10)}}, {{15, -15}});
  }
  {
    // A for loop of 3: v += x, scanning v before each update.
    auto m = model();
    auto* g = m.mutable_graph();
    input(g, "x", onnx::TensorProto::FLOAT, {"2"});
    scalar_init(g->add_initializer(), "M", onnx::TensorProto::INT64, 3);
    auto* n = node(g, "Loop", {"M", "", "x"}, {"v", "rows"});
    auto* b = graph_attr(n, "body");
    input(b, "i", onnx::TensorProto::INT64, {});
    input(b, "c", onnx::TensorProto::BOOL, {});
    input(b, "v_in", onnx::TensorProto::FLOAT, {"2"});
    node(b, "Add", {"v_in", "x"}, {"v_out"});
    node(b, "Identity", {"v_in"}, {"row"});
    output(b, "c");
    output(b, "v_out");
    output(b, "row");
    output(g, "v");
    output(g, "rows");
    OnnxModel o = import(m);
    NDArray x = NDArray::of<float>({2}, std::vector<float>{1, 10});
    expect_runs(o, {{"x", x}}, {{4, 40}, {1, 10, 2, 20, 3, 30}});
  }
}

// softmax(relu(x @ W + b)), x [batch, 4] with a symbolic batch.
TEST(OnnxImport, MlpWithSymbolicBatch) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  std::vector<float> w = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};  // [4,3]
  floats(g->add_initializer(), "W", {4, 3}, w, true);
  floats(g->add_initializer(), "b", {3}, {0.5f, -10, 0}, false);
  node(g, "MatMul", {"x", "W"}, {"h"});
  node(g, "Add", {"h", "b"}, {"y"});
  node(g, "Relu", {"y"}, {"r"});
  node(g, "Softmax", {"r"}, {"out"});
  output(g, "out");
  OnnxModel o = import(m);
  EXPECT_EQ(o.opset, 13);
  ASSERT_EQ(o.graph.inputs().size(), 1u);
  EXPECT_EQ(o.graph.type(o.graph.inputs()[0]).str(), "f32[batch,4]");
  EXPECT_EQ(o.graph.node(o.graph.inputs()[0]).name, "x");
  EXPECT_EQ(o.params.size(), 2u);
  Bindings in = o.params;
  in["x"] = NDArray::of<float>({2, 4}, std::vector<float>{1, 2, 3, 0, 0, 0, 0, 0});
  auto out = interpret(o.graph, in);
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  // Row 0: x@W = [1, 2, 3] + b = [1.5, -8, 3] -> relu [1.5, 0, 3]; row 1: [0.5, 0, 0].
  auto sm = [](std::vector<double> z) {
    double s = 0;
    for (double& v : z) s += (v = std::exp(v));
    for (double& v : z) v /= s;
    return z;
  };
  std::vector<double> want0 = sm({1.5, 0, 3}), want1 = sm({0.5, 0, 0});
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(out[0].data<float>()[j], want0[static_cast<size_t>(j)], 1e-6);
    EXPECT_NEAR(out[0].data<float>()[3 + j], want1[static_cast<size_t>(j)], 1e-6);
  }
  // The same model through the public API (tensorjit/onnx.h): one Program
  // for every batch size, compiled, with the interpreter's values.
  std::string path = std::string(::testing::TempDir()) + "tj_onnx_mlp_" + std::to_string(::getpid()) + ".onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << m.SerializeAsString();
  }
  tj::OnnxModel pm = tj::load_onnx(path);
  EXPECT_EQ(pm.output_names, std::vector<std::string>{"out"});
  tj::Program prog = tj::Program::compile(pm.graph, pm.params);
  EXPECT_TRUE(prog.compiled());
  for (int64_t batch : {2, 5}) {
    std::vector<float> xs(static_cast<size_t>(batch * 4));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 5) - 1.5f;
    Bindings b = o.params;
    b["x"] = NDArray::of<float>({batch, 4}, xs);
    auto want = interpret(o.graph, b);
    auto got = prog.run(Bindings{{"x", b.at("x")}});
    ASSERT_EQ(got[0].shape(), want[0].shape());
    for (int64_t k = 0; k < want[0].numel(); ++k) EXPECT_NEAR(got[0].get(k), want[0].get(k), 1e-6);
  }
  std::remove(path.c_str());
}

// A compiled `tjc run` of a model file seen before takes its program from
// the cache without importing the file (compiler/model_cache.h), with the
// same outputs; the file written again (its modification time put back) is
// imported again. Initializer names IR text cannot spell ("onnx::W") are fine.
TEST(OnnxImport, WarmRunsOfAFileSkipTheImport) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  floats(g->add_initializer(), "onnx::W", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, true);
  node(g, "MatMul", {"x", "onnx::W"}, {"h"});
  node(g, "Relu", {"h"}, {"out"});
  output(g, "out");
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / ("tj_onnx_warm_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path file = dir / "mlp.onnx";
  auto write = [&] { std::ofstream(file, std::ios::binary) << m.SerializeAsString(); };
  write();
  auto run = [&] {
    std::string cmd = "env TJ_CACHE_DIR=" + (dir / "cache").string() + " TJ_LOG=compile " + TJC_PATH + " run " + file.string() +
                      " --sym batch=2 --input x=1,-2,3,4,5,6,-7,8 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(p ? pclose(p) : -1, 0) << out;
    return out;
  };
  auto outputs = [](const std::string& log) {  // the "output I: ..." lines
    std::string r;
    std::istringstream lines(log);
    for (std::string l; std::getline(lines, l);)
      if (l.rfind("output ", 0) == 0) r += l + "\n";
    return r;
  };
  std::string cold = run(), warm = run();
  EXPECT_NE(cold.find("[onnx]"), std::string::npos) << cold;  // imported
  EXPECT_EQ(warm.find("[onnx]"), std::string::npos) << warm;  // not imported
  EXPECT_NE(warm.find("from the cache"), std::string::npos) << warm;
  EXPECT_FALSE(outputs(cold).empty());
  EXPECT_EQ(outputs(warm), outputs(cold));
  auto when = fs::last_write_time(file);
  write();
  fs::last_write_time(file, when);
  std::string again = run();
  EXPECT_NE(again.find("[onnx]"), std::string::npos) << again;
  EXPECT_EQ(outputs(again), outputs(cold));
  fs::remove_all(dir);
}

// The C++ API's warm start: compile_onnx imports the file once; later calls
// for the same file take the program from the cache, with the same outputs.
TEST(OnnxImport, CompileOnnxStartsWarm) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  floats(g->add_initializer(), "w", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, true);
  node(g, "MatMul", {"x", "w"}, {"h"});
  node(g, "Relu", {"h"}, {"out"});
  output(g, "out");
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / ("tj_onnx_api_warm_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "mlp.onnx", std::ios::binary) << m.SerializeAsString();
  setenv("TJ_CACHE_DIR", (dir / "cache").c_str(), 1);
  Bindings in{{"x", NDArray::of<float>({2, 4}, std::vector<float>{1, -2, 3, 4, 5, 6, -7, 8})}};
  OnnxProgram cold = compile_onnx((dir / "mlp.onnx").string());
  OnnxProgram warm = compile_onnx((dir / "mlp.onnx").string());
  EXPECT_TRUE(cold.imported);
  EXPECT_FALSE(warm.imported);
  EXPECT_EQ(warm.output_names, std::vector<std::string>{"out"});
  ASSERT_EQ(warm.program.inputs().size(), 1u);
  EXPECT_EQ(warm.program.inputs()[0].name, "x");
  std::vector<NDArray> a = cold.program.run(in), b = warm.program.run(in);
  EXPECT_EQ(a[0].to_vector(), (std::vector<double>{5, 2, 7, 13, 14, 1}));
  EXPECT_EQ(b[0].to_vector(), a[0].to_vector());
  AotOptions unfused;
  unfused.fuse = false;
  EXPECT_TRUE(compile_onnx((dir / "mlp.onnx").string(), {}, unfused).imported);  // other options: imported
  unsetenv("TJ_CACHE_DIR");
  fs::remove_all(dir);
}

// Gemm (transB, alpha, beta), Reshape by a Constant shape with 0 and -1,
// Transpose, ReduceMean (axes attribute at opset 13), Unsqueeze (axes operand).
TEST(OnnxImport, GemmReshapeTransposeReduce) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "a", onnx::TensorProto::FLOAT, {"2", "3"});
  floats(g->add_initializer(), "B", {2, 3}, {1, 0, 0, 0, 1, 0}, false);  // B^T picks columns 0 and 1
  floats(g->add_initializer(), "C", {2}, {1, 1}, false);
  auto* gemm = node(g, "Gemm", {"a", "B", "C"}, {"y"});  // 2 * a @ B^T + 0.5 * C
  int_attr(gemm, "transB", 1);
  auto* alpha = gemm->add_attribute();
  alpha->set_name("alpha"), alpha->set_type(onnx::AttributeProto::FLOAT), alpha->set_f(2.0f);
  auto* beta = gemm->add_attribute();
  beta->set_name("beta"), beta->set_type(onnx::AttributeProto::FLOAT), beta->set_f(0.5f);
  auto* k = node(g, "Constant", {}, {"shape"});
  auto* kv = k->add_attribute();
  kv->set_name("value"), kv->set_type(onnx::AttributeProto::TENSOR);
  kv->mutable_t()->set_data_type(onnx::TensorProto::INT64), kv->mutable_t()->add_dims(3);
  for (int64_t d : {0, -1, 1}) kv->mutable_t()->add_int64_data(d);
  node(g, "Reshape", {"y", "shape"}, {"r"});  // [2, 2, 1]
  ints_attr(node(g, "Transpose", {"r"}, {"t"}), "perm", {2, 0, 1});  // [1, 2, 2]
  auto* red = node(g, "ReduceMean", {"t"}, {"mean"});
  ints_attr(red, "axes", {-1});
  int_attr(red, "keepdims", 0);  // [1, 2]
  auto* axes = node(g, "Constant", {}, {"axes"});
  auto* av = axes->add_attribute();
  av->set_name("value_ints"), av->set_type(onnx::AttributeProto::INTS), av->add_ints(0);
  node(g, "Unsqueeze", {"mean", "axes"}, {"out"});  // [1, 1, 2]
  output(g, "out");
  OnnxModel o = import(m);
  Bindings in = o.params;
  in["a"] = NDArray::of<float>({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto out = interpret(o.graph, in);
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1, 2}));
  // y = 2 * [[1, 2], [4, 5]] + 0.5 = [[2.5, 4.5], [8.5, 10.5]]; the mean over y's columns.
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 3.5f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 9.5f);
}

TEST(OnnxImport, ClearErrors) {
  std::string junk = "this is not a protobuf message \xff\xff\xff";
  try {
    onnx_import::import_bytes(std::as_bytes(std::span(junk.data(), junk.size())), "junk.onnx");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.onnx: not a valid ONNX model"), std::string::npos) << e.what();
  }
  // An older opset is read when its ops are defined there as at 13.
  auto old = model(11);
  input(old.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
  ints_attr(node(old.mutable_graph(), "Unsqueeze", {"x"}, {"y"}), "axes", {0});  // axes became an operand at 13
  EXPECT_EQ(error_of(old), "unsupported: onnx: test.onnx: opset 11 is not supported (13 and later are; Unsqueeze is defined differently at opset 11 and 13)");
  auto same = model(7);
  input(same.mutable_graph(), "a", onnx::TensorProto::BOOL, {"2"});
  input(same.mutable_graph(), "b", onnx::TensorProto::BOOL, {"2"});
  node(same.mutable_graph(), "And", {"a", "b"}, {"y"});  // unchanged since opset 7
  output(same.mutable_graph(), "y");
  EXPECT_EQ(import(same).graph.type(import(same).graph.outputs()[0]).str(), "bool[2]");
  auto unknown = model();
  input(unknown.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
  node(unknown.mutable_graph(), "Frobnicate", {"x"}, {"y"});
  EXPECT_EQ(error_of(unknown), "unsupported: onnx: Frobnicate node 'Frobnicate_1': the op Frobnicate (domain ai.onnx, opset 13) is not supported yet");
  auto custom = model();
  input(custom.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
  node(custom.mutable_graph(), "Gelu", {"x"}, {"y"})->set_domain("com.microsoft");
  EXPECT_EQ(error_of(custom), "unsupported: onnx: Gelu node 'Gelu_1': the op Gelu of domain 'com.microsoft' is not supported");
  auto undefined = model();
  input(undefined.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
  node(undefined.mutable_graph(), "Add", {"x", "nowhere"}, {"y"});
  EXPECT_NE(error_of(undefined).find("operand 'nowhere' is not defined"), std::string::npos) << error_of(undefined);
  auto shapes = model();
  input(shapes.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2", "3"});
  input(shapes.mutable_graph(), "y", onnx::TensorProto::FLOAT, {"4"});
  node(shapes.mutable_graph(), "Add", {"x", "y"}, {"z"});
  EXPECT_NE(error_of(shapes).find("Add node 'Add_1'"), std::string::npos) << error_of(shapes);
  auto strings = model();
  input(strings.mutable_graph(), "s", onnx::TensorProto::STRING, {"2"});
  EXPECT_NE(error_of(strings).find("unsupported: onnx: input 's': element type 8 (STRING) is not supported"), std::string::npos) << error_of(strings);
  auto mixed = model();  // a valid model would never mix these dtypes
  input(mixed.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
  input(mixed.mutable_graph(), "i", onnx::TensorProto::INT64, {"2"});
  node(mixed.mutable_graph(), "Add", {"x", "i"}, {"y"});
  EXPECT_NE(error_of(mixed).find("onnx: Add node 'Add_1': add(f32[2], i64[2]): operand dtypes differ"), std::string::npos) << error_of(mixed);
  // Dims that ask for terabytes over a few bytes of data are refused before
  // anything is allocated (found by fuzz_onnx: ASan's allocation-size-too-big).
  for (bool raw : {true, false}) {
    auto huge = model();
    floats(huge.mutable_graph()->add_initializer(), "w", {1 << 20, 1 << 20}, {1, 2}, raw);
    input(huge.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"2"});
    node(huge.mutable_graph(), "Add", {"x", "w"}, {"y"});
    EXPECT_EQ(error_of(huge), raw ? "onnx: initializer 'w': 8 bytes of raw data for f32[1048576,1048576]"
                                  : "onnx: initializer 'w': 2 values for f32[1048576,1048576]");
  }
}

// Resize: a bilinear upsampling of [1, 1, 2, 2] by 2 (half_pixel, the
// default) gives the reference's values; bad scales, sizes and attributes
// are clear errors at import.
TEST(OnnxImport, Resize) {
  auto resize = [](std::vector<float> scales, std::vector<int64_t> sizes, std::string mode, std::string coordinates) {
    auto m = model(19);
    auto* g = m.mutable_graph();
    input(g, "x", onnx::TensorProto::FLOAT, {"1", "1", "2", "2"});
    if (!scales.empty()) floats(g->add_initializer(), "scales", {static_cast<int64_t>(scales.size())}, scales, false);
    if (!sizes.empty()) {
      auto* t = g->add_initializer();
      t->set_name("sizes"), t->set_data_type(onnx::TensorProto::INT64), t->add_dims(static_cast<int64_t>(sizes.size()));
      for (int64_t d : sizes) t->add_int64_data(d);
    }
    auto* n = node(g, "Resize", {"x", "", scales.empty() ? "" : "scales", sizes.empty() ? "" : "sizes"}, {"y"});
    for (auto [k, val] : {std::pair{"mode", mode}, std::pair{"coordinate_transformation_mode", coordinates}}) {
      auto* a = n->add_attribute();
      a->set_name(k), a->set_type(onnx::AttributeProto::STRING), a->set_s(val);
    }
    output(g, "y");
    return m;
  };
  OnnxModel o = import(resize({1, 1, 2, 2}, {}, "linear", "half_pixel"));
  Bindings in = o.params;
  in["x"] = NDArray::of<float>({1, 1, 2, 2}, std::vector<float>{1, 2, 3, 4});
  auto out = interpret(o.graph, in);
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1, 4, 4}));
  // Row 0: x_ori = -0.25, 0.25, 0.75, 1.25 along each axis, clamped at the edges.
  const std::vector<float> want = {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], want[i]) << i;
  EXPECT_NE(error_of(resize({1, 1, 2, 2}, {1, 1, 4, 4}, "linear", "half_pixel")).find("exactly one of scales and sizes"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, -2, 2}, {}, "nearest", "asymmetric")).find("scales must be positive"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, 1e12f, 2}, {}, "nearest", "asymmetric")).find("is out of range"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, 0.1f, 2}, {}, "nearest", "asymmetric")).find("leaves dim 2 empty"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, 2}, {}, "nearest", "asymmetric")).find("scales has 3 values for 4 axes"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, 2, 2}, {}, "lanczos", "asymmetric")).find("mode must be nearest, linear or cubic"), std::string::npos);
  EXPECT_NE(error_of(resize({1, 1, 2, 2}, {}, "linear", "sideways")).find("unknown coordinate_transformation_mode 'sideways'"), std::string::npos);
  EXPECT_NE(error_of(resize({}, {1, 1, 0, 4}, "nearest", "asymmetric")).find("sizes must be positive"), std::string::npos);
}

// Resize to sizes computed from the input's own shape, its batch symbolic
// (an exported F.interpolate(size=...) with a dynamic batch): the batch and
// channel sizes are the input's dims, not resized; the program runs at
// any batch.
TEST(OnnxImport, ResizeToSizesFromASymbolicShape) {
  auto m = model(19);
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"batch", "2", "3", "3"});
  node(g, "Shape", {"x"}, {"s"});
  constant_ints(g, "first2", {0, 1});
  node(g, "Gather", {"s", "first2"}, {"nc"});  // [batch, 2]
  constant_ints(g, "hw", {6, 5});
  int_attr(node(g, "Concat", {"nc", "hw"}, {"sizes"}), "axis", 0);  // [batch, 2, 6, 5]
  node(g, "Resize", {"x", "", "", "sizes"}, {"y"});  // nearest, half_pixel, round_prefer_floor
  output(g, "y");
  OnnxModel o = import(m);
  EXPECT_EQ(o.graph.type(o.graph.outputs()[0]).str(), "f32[batch,2,6,5]");
  for (int64_t n : {1, 3}) {
    Bindings in = o.params;
    std::vector<float> xs(static_cast<size_t>(n * 18));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
    in["x"] = NDArray::of<float>({n, 2, 3, 3}, xs);
    auto out = interpret(o.graph, in);
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{n, 2, 6, 5}));
    // Rows: x_ori = (i + 0.5) / 2 - 0.5 -> 0 0 1 1 2 2 (ties down); columns
    // at scale 5/3: 0 0 1 2 2.
    const int64_t rows[] = {0, 0, 1, 1, 2, 2}, cols[] = {0, 0, 1, 2, 2};
    const float* y = out[0].data<float>();
    for (int64_t b = 0; b < n * 2; ++b)
      for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 5; ++c) EXPECT_EQ(y[(b * 6 + r) * 5 + c], xs[static_cast<size_t>((b * 3 + rows[r]) * 3 + cols[c])]) << b << " " << r << " " << c;
  }
}

// A window's geometry is checked before it is lowered: a kernel of size 0
// (found by fuzz_onnx: ConvTranspose looped forever over its offsets), one
// with too many offsets, and strides or pads whose arithmetic would overflow.
TEST(OnnxImport, WindowGeometryIsChecked) {
  auto conv_t = [](std::vector<std::string> wdims, std::vector<int64_t> strides) {
    auto m = model();
    auto* g = m.mutable_graph();
    input(g, "x", onnx::TensorProto::FLOAT, {"17", "1", "3", "3"});
    input(g, "w", onnx::TensorProto::FLOAT, wdims);
    ints_attr(node(g, "ConvTranspose", {"x", "w"}, {"y"}), "strides", strides);
    output(g, "y");
    return m;
  };
  EXPECT_NE(error_of(conv_t({"1", "2", "0", "3"}, {3, 2})).find("ConvTranspose node 'ConvTranspose_1': conv_transpose: kernel sizes must be positive"), std::string::npos)
      << error_of(conv_t({"1", "2", "0", "3"}, {3, 2}));
  EXPECT_NE(error_of(conv_t({"1", "2", "100", "100"}, {1, 1})).find("a kernel of more than 4096 offsets is not supported"), std::string::npos);
  EXPECT_NE(error_of(conv_t({"1", "2", "2", "2"}, {int64_t{1} << 62, 1})).find("a stride, dilation or pad of 4611686018427387904 is out of range"), std::string::npos);
  EXPECT_EQ(import(conv_t({"1", "2", "2", "2"}, {3, 2})).graph.type(import(conv_t({"1", "2", "2", "2"}, {3, 2})).graph.outputs()[0]).str(), "f32[17,2,8,6]");
  auto pool = model();
  input(pool.mutable_graph(), "x", onnx::TensorProto::FLOAT, {"1", "1", "3", "3"});
  ints_attr(node(pool.mutable_graph(), "MaxPool", {"x"}, {"y"}), "kernel_shape", {0, 2});
  output(pool.mutable_graph(), "y");
  EXPECT_NE(error_of(pool).find("MaxPool node 'MaxPool_1': max_pool: kernel sizes must be positive"), std::string::npos) << error_of(pool);
}

// 4-bit weights come packed two to a byte (raw_data, or int32_data) and are
// unpacked to one byte each; a cast to float8 without saturating makes an
// out-of-range value NaN. A packed length that does not match is an error.
TEST(OnnxImport, PackedFourBitWeightsAndFloat8Casts) {
  auto m = model(21);
  auto* g = m.mutable_graph();
  auto* w = g->add_initializer();
  w->set_name("w"), w->set_data_type(22 /* INT4 */), w->add_dims(5);
  const int8_t v[] = {-8, 7, -1, 0, 3};
  std::string packed;
  for (int i = 0; i < 5; i += 2) packed += static_cast<char>((v[i] & 0xf) | (i + 1 < 5 ? (v[i + 1] & 0xf) << 4 : 0));
  w->set_raw_data(packed);
  auto* u = g->add_initializer();
  u->set_name("u"), u->set_data_type(21 /* UINT4 */), u->add_dims(3);
  u->add_int32_data(0xf2), u->add_int32_data(0x09);  // 2, 15, 9
  input(g, "x", onnx::TensorProto::FLOAT, {"2"});
  int_attr(node(g, "Cast", {"w"}, {"wf"}), "to", onnx::TensorProto::FLOAT);
  int_attr(node(g, "Cast", {"u"}, {"uf"}), "to", onnx::TensorProto::FLOAT);
  auto* c = node(g, "Cast", {"x"}, {"x8"});
  int_attr(c, "to", 17 /* FLOAT8E4M3FN */);
  int_attr(c, "saturate", 0);
  int_attr(node(g, "Cast", {"x8"}, {"xf"}), "to", onnx::TensorProto::FLOAT);
  output(g, "wf"), output(g, "uf"), output(g, "xf");
  OnnxModel o = import(m);
  EXPECT_EQ(o.params.at("w").dtype(), DType::i4);
  Bindings in{{"x", NDArray::of<float>({2}, std::vector<float>{1000.f, 0.3f})}};
  Bindings all = o.params;
  all["x"] = in["x"];
  auto interp = interpret(o.graph, all);
  auto comp = tj::compile(o.graph, o.params).run(in);
  for (const auto* r : {&interp, &comp}) {
    EXPECT_EQ((*r)[0].to_vector(), (std::vector<double>{-8, 7, -1, 0, 3}));
    EXPECT_EQ((*r)[1].to_vector(), (std::vector<double>{2, 15, 9}));
    EXPECT_TRUE(std::isnan((*r)[2].get(0)));  // 1000 is beyond e4m3fn's 448
    EXPECT_EQ((*r)[2].get(1), 0.3125);        // 0.3 to 3 mantissa bits
  }
  w->set_raw_data(packed.substr(0, 2));
  EXPECT_NE(error_of(m).find("2 bytes of packed data for i4[5] (3 bytes)"), std::string::npos) << error_of(m);
}

// Initializers in an external-data file (the spec's location, offset,
// length) are read from the model's folder; a missing or short file, or a
// location outside the folder, is a clear error. A truncated model file is
// one too.
TEST(OnnxImport, ExternalDataAndTruncatedFiles) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / ("tj_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("pad!", 4);  // the tensor starts at offset 4
    f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  }
  auto with_location = [&](const std::string& location, const std::string& offset) {
    auto m = model();
    auto* g = m.mutable_graph();
    auto* t = g->add_initializer();
    t->set_name("w"), t->set_data_type(onnx::TensorProto::FLOAT), t->add_dims(2), t->add_dims(3);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location"), e->set_value(location);
    auto* o = t->add_external_data();
    o->set_key("offset"), o->set_value(offset);
    node(g, "Neg", {"w"}, {"y"});
    output(g, "y");
    fs::path p = dir / "model.onnx";
    std::ofstream f(p, std::ios::binary);
    f << m.SerializeAsString();
    return p.string();
  };
  auto error_of_file = [](const std::string& p) -> std::string {
    try {
      onnx_import::import_file(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  NDArray kept;
  {
    OnnxModel o = onnx_import::import_file(with_location("weights.bin", "4"));
    ASSERT_EQ(o.params.at("w").shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(o.params.at("w").is_view());  // mapped, not read
    kept = o.params.at("w");
  }
  EXPECT_EQ(kept.data<float>()[5], 6.f);  // the mapping outlives the model
  kept.data<float>()[5] = 7.f;            // a private page: the file keeps its 6
  EXPECT_EQ(onnx_import::import_file(with_location("weights.bin", "4")).params.at("w").data<float>()[5], 6.f);
  {
    std::ofstream f(dir / "odd.bin", std::ios::binary);
    f.write("pa", 2);  // floats at offset 2 are not aligned: copied
    f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  }
  OnnxModel odd = onnx_import::import_file(with_location("odd.bin", "2"));
  EXPECT_FALSE(odd.params.at("w").is_view());
  EXPECT_EQ(odd.params.at("w").data<float>()[1], 2.f);
  EXPECT_NE(error_of_file(with_location("missing.bin", "0")).find("external data file"), std::string::npos);
  EXPECT_NE(error_of_file(with_location("weights.bin", "8")).find("runs past the end"), std::string::npos);
  EXPECT_NE(error_of_file(with_location("../weights.bin", "0")).find("outside the model's folder"), std::string::npos);
  EXPECT_NE(error_of_file(with_location("weights.bin", "four")).find("offset 'four' is not a number"), std::string::npos);
  // The same model cut short.
  std::string bytes;
  {
    std::ifstream f(with_location("weights.bin", "4"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (size_t keep : {bytes.size() / 2, bytes.size() - 3}) {
    try {
      onnx_import::import_bytes(std::as_bytes(std::span(bytes.data(), keep)), "cut.onnx");
      ADD_FAILURE() << keep << " of " << bytes.size() << " bytes imported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.onnx"), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

// x f32[2,3] reshaped to `shape`, an i64[2] graph input.
onnx::ModelProto reshape_by_input() {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"2", "3"});
  input(g, "shape", onnx::TensorProto::INT64, {"2"});
  node(g, "Reshape", {"x", "shape"}, {"y"});
  output(g, "y");
  return m;
}

// A shape that is a graph input must be known at import: MustBeKnown says
// so, and known_inputs fixes it (the input becomes a constant).
TEST(OnnxImport, ShapeOperandsFromInputsAreKnownOnRequest) {
  auto m = reshape_by_input();
  std::string bytes = m.SerializeAsString();
  auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
  EXPECT_THROW(onnx_import::import_bytes(span, "r.onnx"), onnx_import::MustBeKnown);
  onnx_import::ImportOptions o;
  o.known_inputs["shape"] = NDArray::of<int64_t>({2}, std::vector<int64_t>{3, -1});
  OnnxModel r = onnx_import::import_bytes(span, "r.onnx", o);
  EXPECT_EQ(r.graph.inputs().size(), 1u);
  EXPECT_EQ(r.graph.type(r.graph.outputs()[0]).str(), "f32[3,2]");
  o.known_inputs["shape"] = NDArray::of<int32_t>({2}, std::vector<int32_t>{3, -1});
  try {
    onnx_import::import_bytes(span, "r.onnx", o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known input 'shape' is i32[2], the graph's input is i64[2]"), std::string::npos) << e.what();
  }
}

// tj::OnnxFunction: a shape given as an input is specialized on its value,
// one program per value, the values seen before running their program.
TEST(OnnxImport, ShapeInputsAreSpecializedPerValue) {
  auto m = reshape_by_input();
  std::string path = std::string(::testing::TempDir()) + "tj_onnx_spec_" + std::to_string(::getpid()) + ".onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  OnnxFunction f(path, {}, {}, 2);
  EXPECT_EQ(f.specialized(), std::vector<std::string>{"shape"});
  NDArray x = NDArray::of<float>({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto run = [&](std::vector<int64_t> shape) {
    Bindings in{{"x", x}, {"shape", NDArray::of<int64_t>({2}, shape)}};
    return f(in).at(0);
  };
  EXPECT_EQ(run({3, 2}).shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(run({1, -1}).shape(), (std::vector<int64_t>{1, 6}));
  NDArray again = run({3, 2});
  EXPECT_EQ(again.data<float>()[5], 6.0f);
  EXPECT_EQ(f.programs(), 2u);
  try {  // past the limit: a clear error
    run({6, 1});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 programs compiled for values of the inputs that decide its shapes (shape)"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The shape arithmetic of exported transformers, evaluated at import:
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
TEST(OnnxImport, ShapeArithmeticIsEvaluatedAtImport) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  node(g, "Shape", {"x"}, {"s"});
  auto* zero = node(g, "Constant", {}, {"zero"});
  auto* zv = zero->add_attribute();
  zv->set_name("value_int"), zv->set_type(onnx::AttributeProto::INT), zv->set_i(0);
  node(g, "Gather", {"s", "zero"}, {"b"});  // 2, a scalar
  auto* ax = node(g, "Constant", {}, {"ax"});
  auto* axv = ax->add_attribute();
  axv->set_name("value_ints"), axv->set_type(onnx::AttributeProto::INTS), axv->add_ints(0);
  node(g, "Unsqueeze", {"b", "ax"}, {"b1"});  // [2]
  auto* minus = node(g, "Constant", {}, {"m1"});
  auto* mv = minus->add_attribute();
  mv->set_name("value_ints"), mv->set_type(onnx::AttributeProto::INTS), mv->add_ints(-1);
  int_attr(node(g, "Concat", {"b1", "m1"}, {"shape"}), "axis", 0);  // [2, -1]
  node(g, "Reshape", {"x", "shape"}, {"out"});
  output(g, "out");
  OnnxModel o = import(m);
  EXPECT_EQ(o.graph.type(o.graph.outputs()[0]).str(), "f32[2,12]");
}

// The same arithmetic on symbolic dims (dim_param inputs): the shapes stay
// symbolic, and Range(0, seq) becomes an iota of the symbol; the model runs
// at any batch and sequence length.
TEST(OnnxImport, SymbolicShapeArithmeticKeepsSizeSymbols) {
  auto m = model();
  auto* g = m.mutable_graph();
  input(g, "x", onnx::TensorProto::FLOAT, {"batch", "seq", "4"});
  node(g, "Shape", {"x"}, {"s"});
  constant_ints(g, "first2", {0, 1});
  node(g, "Gather", {"s", "first2"}, {"bs"});  // [batch, seq]
  constant_ints(g, "tail", {2, 2});
  int_attr(node(g, "Concat", {"bs", "tail"}, {"shape"}), "axis", 0);  // [batch, seq, 2, 2]
  node(g, "Reshape", {"x", "shape"}, {"y"});
  auto* one = node(g, "Constant", {}, {"one"})->add_attribute();
  one->set_name("value_int"), one->set_type(onnx::AttributeProto::INT), one->set_i(1);
  node(g, "Gather", {"s", "one"}, {"seq"});  // a scalar: seq
  auto* zero = node(g, "Constant", {}, {"zero"})->add_attribute();
  zero->set_name("value_int"), zero->set_type(onnx::AttributeProto::INT), zero->set_i(0);
  node(g, "Range", {"zero", "seq", "one"}, {"pos"});  // [seq]
  output(g, "y");
  output(g, "pos");
  OnnxModel o = import(m);
  EXPECT_EQ(o.graph.type(o.graph.outputs()[0]).str(), "f32[batch,seq,2,2]");
  EXPECT_EQ(o.graph.type(o.graph.outputs()[1]).str(), "i64[seq]");
  Bindings in;
  in["x"] = NDArray::of<float>({1, 3, 4}, std::vector<float>(12, 1.f));
  auto out = interpret(o.graph, in);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 3, 2, 2}));
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(out[1].data<int64_t>()[2], 2);
}

}  // namespace
}  // namespace tj
