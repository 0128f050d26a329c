// accel's "ccl" backend for torch.distributed: oneCCL's public C++ API (oneapi/ccl.hpp) behind c10d::Backend,
// for CPU tensors. Registered from Python by accel_ccl/__init__.py.
//
// What DDP and chapter 9's pipeline use, and no more: allreduce (SUM, PRODUCT, MIN, MAX on float32, float64,
// bfloat16, float16 and the integer types), broadcast, allgather of equal sizes (and its flat form), barrier.
// Anything else is a c10::Error that names the operation or dtype. Each collective runs to completion before
// it returns, so the Work handed back is already complete (its future too: DDP's comm hook waits on it).
// A collective that does not complete within the group's timeout (a peer rank died or stopped answering)
// raises DistBackendError instead of waiting forever: oneCCL's own wait() has no timeout, so the event is
// polled with test().
//
// Bootstrap: rank 0 creates oneCCL's main key-value store and publishes its address in the process group's
// c10d Store; every other rank reads it (Store::get waits at most the group's timeout) and attaches to it.
#include <torch/extension.h>
#include <pybind11/chrono.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <oneapi/ccl.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace accel_ccl {

namespace {

constexpr const char* kBackendName = "ccl";
constexpr const char* kKvsKey = "accel_ccl/kvs_address";

std::once_flag g_ccl_init_once;

void ensureCclInit() {
  std::call_once(g_ccl_init_once, [] { ccl::init(); });
}

// dtype mapping used for reductions; the reduction must run on the real type.
ccl::datatype reduceDtype(at::ScalarType t, const char* opName) {
  switch (t) {
    case at::kFloat:
      return ccl::datatype::float32;
    case at::kDouble:
      return ccl::datatype::float64;
    case at::kBFloat16:
      return ccl::datatype::bfloat16;
    case at::kHalf:
      return ccl::datatype::float16;
    case at::kInt:
      return ccl::datatype::int32;
    case at::kLong:
      return ccl::datatype::int64;
    case at::kChar:
      return ccl::datatype::int8;
    case at::kByte:
      return ccl::datatype::uint8;
    default:
      TORCH_CHECK(
          false,
          "ccl backend: ",
          opName,
          " does not support dtype ",
          c10::toString(t));
  }
}

ccl::reduction reduceOp(const c10d::ReduceOp& op, const char* opName) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ccl::reduction::sum;
    case c10d::ReduceOp::PRODUCT:
      return ccl::reduction::prod;
    case c10d::ReduceOp::MIN:
      return ccl::reduction::min;
    case c10d::ReduceOp::MAX:
      return ccl::reduction::max;
    default: {
      static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                    "BAND", "BOR", "BXOR", "PREMUL_SUM"};
      int i = static_cast<int>(op.op_);
      TORCH_CHECK(
          false,
          "ccl backend: ",
          opName,
          " does not support ReduceOp.",
          (i >= 0 && i < 9) ? names[i] : "UNKNOWN",
          " (supported: SUM, PRODUCT, MIN, MAX)");
    }
  }
}

void checkCpuDense(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(
      t.device().is_cpu(),
      "ccl backend: ",
      opName,
      " supports only CPU tensors, got a tensor on ",
      t.device());
  TORCH_CHECK(
      t.layout() == at::kStrided,
      "ccl backend: ",
      opName,
      " supports only dense (strided) tensors");
}

void checkSingle(const std::vector<at::Tensor>& ts, const char* opName) {
  TORCH_CHECK(
      ts.size() == 1,
      "ccl backend: ",
      opName,
      " expects exactly one tensor per call, got ",
      ts.size());
}

// Completed work: the collective already ran synchronously; this object just
// carries the output tensors and a completed future (DDP uses getFuture()).
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(
      int rank,
      c10d::OpType opType,
      std::vector<at::Tensor> outputs)
      : c10d::Work(rank, opType), outputs_(std::move(outputs)) {
    future_ = c10::make_intrusive<at::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    future_->markCompleted(c10::IValue(outputs_));
  }

  bool isCompleted() override {
    return true;
  }
  bool isSuccess() const override {
    return true;
  }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    return true;
  }
  void synchronize() override {}
  std::vector<at::Tensor> result() override {
    return outputs_;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

} // namespace

class BackendCCL : public c10d::Backend {
 public:
  BackendCCL(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout)
      : c10d::Backend(rank, size), store_(store), timeout_(timeout) {
    ensureCclInit();
    std::shared_ptr<ccl::kvs> kvs;
    if (rank == 0) {
      kvs = ccl::create_main_kvs();
      auto addr = kvs->get_address();
      std::vector<uint8_t> bytes(addr.begin(), addr.end());
      store_->set(kKvsKey, bytes);
    } else {
      // Blocks until rank 0 published the address (or the store times out).
      std::vector<uint8_t> bytes = store_->get(kKvsKey);
      ccl::kvs::address_type addr{};
      TORCH_CHECK(
          bytes.size() == addr.size(),
          "ccl backend: bad KVS address size in store: ",
          bytes.size(),
          " (expected ",
          addr.size(),
          ")");
      std::memcpy(addr.data(), bytes.data(), addr.size());
      kvs = ccl::create_kvs(addr);
    }
    comm_ = std::make_unique<ccl::communicator>(
        ccl::create_communicator(size, rank, kvs));
    kvs_ = std::move(kvs);
  }

  ~BackendCCL() override = default;

  const std::string getBackendName() const override {
    return kBackendName;
  }

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override {
    constexpr const char* op = "allreduce";
    checkSingle(tensors, op);
    at::Tensor& t = tensors[0];
    checkCpuDense(t, op);
    auto dt = reduceDtype(t.scalar_type(), op);
    auto red = reduceOp(opts.reduceOp, op);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    {
      std::lock_guard<std::mutex> lk(mu_);
      runCollective(op, opts.timeout, [&] {
        return ccl::allreduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dt, red, *comm_);
      });
    }
    if (!buf.is_same(t)) {
      t.copy_(buf);
    }
    return c10::make_intrusive<CompletedWork>(
        rank_, c10d::OpType::ALLREDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override {
    constexpr const char* op = "broadcast";
    checkSingle(tensors, op);
    TORCH_CHECK(
        opts.rootTensor == 0, "ccl backend: broadcast supports rootTensor=0 only");
    TORCH_CHECK(
        opts.rootRank >= 0 && opts.rootRank < size_,
        "ccl backend: broadcast root rank out of range: ",
        opts.rootRank);
    at::Tensor& t = tensors[0];
    checkCpuDense(t, op);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    // Broadcast moves bytes; any dtype is fine.
    {
      std::lock_guard<std::mutex> lk(mu_);
      runCollective(op, opts.timeout, [&] {
        return ccl::broadcast(
            buf.data_ptr(), buf.nbytes(), ccl::datatype::uint8, static_cast<int>(opts.rootRank), *comm_);
      });
    }
    if (!buf.is_same(t)) {
      t.copy_(buf);
    }
    return c10::make_intrusive<CompletedWork>(
        rank_, c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputTensors,
      std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts) override {
    constexpr const char* op = "allgather";
    checkSingle(inputTensors, op);
    TORCH_CHECK(
        outputTensors.size() == 1,
        "ccl backend: allgather expects one output tensor list, got ",
        outputTensors.size());
    auto& outs = outputTensors[0];
    const at::Tensor& in = inputTensors[0];
    checkCpuDense(in, op);
    TORCH_CHECK(
        static_cast<int>(outs.size()) == size_,
        "ccl backend: allgather output list must have world_size (",
        size_,
        ") tensors, got ",
        outs.size());
    for (const auto& o : outs) {
      checkCpuDense(o, op);
      TORCH_CHECK(
          o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
          "ccl backend: allgather supports only equal-size, same-dtype tensors "
          "(input numel ",
          in.numel(),
          " dtype ",
          c10::toString(in.scalar_type()),
          "; output numel ",
          o.numel(),
          " dtype ",
          c10::toString(o.scalar_type()),
          ")");
    }
    at::Tensor src = in.contiguous();
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    gatherBytes(op, opts.timeout, src, flat);
    for (int r = 0; r < size_; ++r) {
      outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
    }
    return c10::make_intrusive<CompletedWork>(
        rank_, c10d::OpType::ALLGATHER, outs);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& outputBuffer,
      at::Tensor& inputBuffer,
      const c10d::AllgatherOptions& opts) override {
    constexpr const char* op = "_allgather_base";
    checkCpuDense(inputBuffer, op);
    checkCpuDense(outputBuffer, op);
    TORCH_CHECK(
        outputBuffer.scalar_type() == inputBuffer.scalar_type(),
        "ccl backend: _allgather_base dtype mismatch");
    TORCH_CHECK(
        outputBuffer.numel() == inputBuffer.numel() * size_,
        "ccl backend: _allgather_base output must have world_size * input numel elements");
    at::Tensor src = inputBuffer.contiguous();
    at::Tensor dst = outputBuffer.is_contiguous() ? outputBuffer : outputBuffer.contiguous();
    gatherBytes(op, opts.timeout, src, dst);
    if (!dst.is_same(outputBuffer)) {
      outputBuffer.copy_(dst);
    }
    return c10::make_intrusive<CompletedWork>(
        rank_, c10d::OpType::_ALLGATHER_BASE, std::vector<at::Tensor>{outputBuffer});
  }

  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      runCollective("barrier", opts.timeout, [&] { return ccl::barrier(*comm_); });
    }
    return c10::make_intrusive<CompletedWork>(
        rank_, c10d::OpType::BARRIER, std::vector<at::Tensor>{});
  }

  // Factory used from Python: creator_fn(store, rank, world_size, timeout).
  static c10::intrusive_ptr<c10d::Backend> create(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout) {
    return c10::make_intrusive<BackendCCL>(store, rank, size, timeout);
  }

 private:
  // Start a collective (`start` returns its ccl::event) and wait for it at most `timeout` (the call's own,
  // else the group's).
  template <typename Start>
  void runCollective(const char* opName, std::chrono::milliseconds timeout, Start&& start) {
    if (timeout == c10d::kUnsetTimeout) {
      timeout = timeout_;
    }
    try {
      ccl::event done = start();
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!done.test()) {
        if (std::chrono::steady_clock::now() > deadline) {
          // An incomplete event's destructor waits for it, forever when the peer is gone: it is left
          // alive (leaked on purpose), and the rank ends without tearing oneCCL down.
          new ccl::event(std::move(done));
          C10_THROW_ERROR(
              DistBackendError,
              c10::str(
                  "ccl backend: ", opName, " did not complete within ", timeout.count() / 1000.0,
                  " s: a peer rank is gone or stopped answering"));
        }
        std::this_thread::yield();
      }
    } catch (const ccl::exception& e) {
      TORCH_CHECK(false, "ccl backend: ", opName, " failed: ", e.what());
    }
  }

  // Equal-size allgather of contiguous src into contiguous dst (size_ * src).
  void gatherBytes(const char* opName, std::chrono::milliseconds timeout, const at::Tensor& src, at::Tensor& dst) {
    const size_t nbytes = src.nbytes();
    std::vector<size_t> counts(size_, nbytes);
    std::lock_guard<std::mutex> lk(mu_);
    runCollective(opName, timeout, [&] {
      return ccl::allgatherv(src.data_ptr(), nbytes, dst.data_ptr(), counts, ccl::datatype::uint8, *comm_);
    });
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;  // the group's: how long any collective may wait for its peers
  std::shared_ptr<ccl::kvs> kvs_;
  std::unique_ptr<ccl::communicator> comm_;
  std::mutex mu_;
};

} // namespace accel_ccl

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "accel's oneCCL backend for torch.distributed (CPU)";
  m.def(
      "create_backend",
      &accel_ccl::BackendCCL::create,
      py::arg("store"),
      py::arg("rank"),
      py::arg("world_size"),
      py::arg("timeout"),
      // Construction blocks on the store / KVS handshake: release the GIL.
      py::call_guard<py::gil_scoped_release>());
  m.def("oneccl_version", [] {
    auto v = ccl::get_library_version();
    return std::string(v.full);
  });
}
