#include <kiln/tensor.h>

#include "src/core/allocator.h"
#include "src/core/device.h"
#include "src/core/element.h"
#include "src/core/storage.h"
#include "src/core/strided.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numbers>
#include <ostream>
#include <sstream>

namespace kiln {

namespace detail {
void throw_dtype_mismatch(const char* what, DType expected, DType actual) {
    KILN_USER_ERROR(what << ": expected dtype " << dtype_name(expected) << ", got " << dtype_name(actual));
}

std::shared_ptr<Storage> allocate(std::size_t bytes, Device device) {
    auto s = std::make_shared<Storage>();
    if (device.kind == Device::Kind::cpu)
        s->ptr = core::host_alloc(bytes, &s->capacity);
    else
        s->ptr = core::device_allocate(device, bytes, &s->capacity);
    s->bytes = bytes;
    s->device = device;
    s->owned = true;
    return s;
}

Storage::~Storage() {
    if (owned && device.kind != Device::Kind::cpu) core::device_release(device, ptr, capacity);
    else if (owned) core::host_free(ptr, capacity);
    else if (deleter) deleter(ptr);
}
}  // namespace detail

namespace {
// Methods that read or view a tensor's values need one.
void require_defined(const Tensor& t, const char* what) {
    KILN_USER_CHECK(t.defined(), what << ": the tensor is undefined (default-constructed); make one with a factory "
                                         "such as Tensor::zeros");
}
std::int64_t norm_axis(std::int64_t axis, std::int64_t rank, const char* what) {
    KILN_USER_CHECK(axis >= -rank && axis < rank,
                    what << ": axis " << axis << " is out of range for rank " << rank);
    return axis < 0 ? axis + rank : axis;
}
std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
// Uniform in (0, 1), from the seed and a counter.
double uniform(std::uint64_t seed, std::uint64_t i) {
    std::uint64_t r = splitmix(splitmix(seed) ^ (i * 0xd1b54a32d192ed03ULL));
    return (static_cast<double>(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
}  // namespace

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
    return support::checked_strides(shape, "contiguous_strides");
}

std::string shape_to_string(const Shape& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

Tensor::Tensor() = default;

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, Shape shape, std::vector<std::int64_t> strides,
               std::int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset),
      dtype_(dtype) {}

namespace {
// A new dense tensor, its shape checked; `what` names the caller for messages.
Tensor dense(const Shape& shape, DType dtype, Device device, const char* what) {
    const auto bytes = static_cast<std::size_t>(support::checked_bytes(shape, dtype_size(dtype), what));
    std::vector<std::int64_t> strides = support::checked_strides(shape, what);
    return Tensor(detail::allocate(bytes, device), shape, std::move(strides), 0, dtype);
}
// Sets a new dense tensor's bytes to zero, on its device.
void fill_zero(const Tensor& t) {
    const std::size_t bytes = t.storage()->bytes;
    if (t.device().kind == Device::Kind::cpu) std::memset(t.data(), 0, bytes);
    else core::device_fill_bytes(t.device(), t.data(), 0, bytes);
}
Tensor filled(Tensor t, double value) {
    if (t.device().kind != Device::Kind::cpu) {  // filled on the host, then copied
        t.copy_from(filled(Tensor::empty(t.shape(), t.dtype()), value));
        return t;
    }
    core::dispatch(t.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T v = core::convert<T>(value);
        std::fill_n(static_cast<T*>(t.data()), t.numel(), v);
    });
    return t;
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
    Tensor t = dense(shape, dtype, device, "Tensor::empty");
    // A bool's byte must be 0 or 1 (reading another is undefined), which fresh memory is not.
    if (dtype == DType::boolean) fill_zero(t);
    return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
    Tensor t = dense(shape, dtype, device, "Tensor::zeros");
    fill_zero(t);
    return t;
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
    return filled(dense(shape, dtype, device, "Tensor::ones"), 1.0);
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
    return filled(dense(shape, dtype, device, "Tensor::full"), value);
}
Tensor Tensor::randn(const Shape& shape, std::uint64_t seed, DType dtype) {
    Tensor t = dense(shape, dtype, Device::cpu(), "Tensor::randn");
    char* p = static_cast<char*>(t.data());
    std::size_t es = dtype_size(dtype);
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
        double u1 = uniform(seed, 2 * static_cast<std::uint64_t>(i));
        double u2 = uniform(seed, 2 * static_cast<std::uint64_t>(i) + 1);
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        core::store_double(p + i * es, dtype, z);
    }
    return t;
}
Tensor Tensor::rand(const Shape& shape, std::uint64_t seed, DType dtype, double lo, double hi) {
    KILN_USER_CHECK(hi > lo, "Tensor::rand: expected lo < hi, got lo=" << lo << " hi=" << hi);
    Tensor t = dense(shape, dtype, Device::cpu(), "Tensor::rand");
    char* p = static_cast<char*>(t.data());
    std::size_t es = dtype_size(dtype);
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
        double u = uniform(seed, static_cast<std::uint64_t>(i));
        double v = lo + (hi - lo) * u;
        if (!is_floating(dtype)) v = std::floor(v);
        core::store_double(p + i * es, dtype, v);
    }
    return t;
}
Tensor Tensor::from_bytes(const void* data, std::size_t count, DType dtype, const Shape& shape) {
    const std::int64_t n = support::checked_numel(shape, "Tensor::from");
    KILN_USER_CHECK(static_cast<std::int64_t>(count) == n,
                    "Tensor::from: shape " << shape_to_string(shape) << " needs " << n << " values, got " << count);
    Tensor t = dense(shape, dtype, Device::cpu(), "Tensor::from");
    if (count) std::memcpy(t.data(), data, count * dtype_size(dtype));
    return t;
}
Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device, std::function<void(void*)> deleter) {
    return wrap_strided(data, shape, support::checked_strides(shape, "Tensor::wrap"), dtype, device, std::move(deleter));
}
Tensor Tensor::wrap_strided(void* data, const Shape& shape, const std::vector<std::int64_t>& strides, DType dtype,
                            Device device, std::function<void(void*)> deleter) {
    const std::int64_t n = support::checked_numel(shape, "Tensor::wrap");
    KILN_USER_CHECK(strides.size() == shape.size(), "Tensor::wrap: expected " << shape.size()
                                                        << " strides for shape " << shape_to_string(shape)
                                                        << ", got " << strides.size());
    for (auto s : strides) KILN_USER_CHECK(s >= 0, "Tensor::wrap: negative stride " << s << " is not supported");
    KILN_USER_CHECK(data != nullptr || n == 0, "Tensor::wrap: data is null");
    const std::int64_t bytes = support::checked_span_bytes(shape, strides, dtype_size(dtype), "Tensor::wrap");
    auto s = std::make_shared<detail::Storage>();
    s->ptr = data;
    s->bytes = static_cast<std::size_t>(bytes);
    s->device = device;
    s->deleter = std::move(deleter);
    return Tensor(std::move(s), shape, strides, 0, dtype);
}

std::int64_t Tensor::dim(std::int64_t i) const {
    require_defined(*this, "Tensor::dim");
    return shape_[norm_axis(i, rank(), "Tensor::dim")];
}
// Every tensor's element count fits in int64 (the factories and views check it), so the
// product needs no check here (numel is on every kernel's path). It is taken in uint64, where
// wrapping is defined: with a zero dim, the other dims' product may overflow ([2^40,2^40,0]),
// and the result is still exact (0).
std::int64_t Tensor::numel() const {
    if (!storage_) return 0;
    std::uint64_t n = 1;
    for (auto d : shape_) n *= static_cast<std::uint64_t>(d);
    return static_cast<std::int64_t>(n);
}
Device Tensor::device() const { return storage_ ? storage_->device : Device::cpu(); }
bool Tensor::is_contiguous() const {
    // No elements, nothing to lay out, whatever the strides (a copy of [0,2^40,2^40] could not
    // even be made: its row-major strides overflow).
    for (auto d : shape_)
        if (d == 0) return true;
    std::int64_t expected = 1;
    for (std::size_t i = shape_.size(); i-- > 0;) {
        if (shape_[i] == 1) continue;
        if (strides_[i] != expected) return false;
        expected *= shape_[i];
    }
    return true;
}
void* Tensor::data() const {
    if (!storage_) return nullptr;
    return static_cast<char*>(storage_->ptr) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

namespace {

// Copies the values of src into dst (same shape, both on the host), converting the dtype.
void copy_host(const Tensor& dst_t, const Tensor& src) {
    char* dst = static_cast<char*>(dst_t.data());
    const char* s = static_cast<const char*>(src.data());
    const Shape& shape = dst_t.shape();
    core::dispatch(dst_t.dtype(), [&](auto dtag) {
        using D = decltype(dtag);
        core::dispatch(src.dtype(), [&](auto stag) {
            using S = decltype(stag);
            D* dp = reinterpret_cast<D*>(dst);
            const S* sp = reinterpret_cast<const S*>(s);
            core::parallel_for_each_row<2>(
                shape, {&dst_t.strides(), &src.strides()},
                [&](std::int64_t n, const std::array<std::int64_t, 2>& off, const std::array<std::int64_t, 2>& st) {
                    D* o = dp + off[0];
                    const S* i = sp + off[1];
                    if constexpr (std::is_same_v<D, S>) {
                        if (st[0] == 1 && st[1] == 1) {
                            std::memcpy(o, i, static_cast<std::size_t>(n) * sizeof(D));
                            return;
                        }
                    }
                    for (std::int64_t k = 0; k < n; ++k) o[k * st[0]] = core::convert<D>(i[k * st[1]]);
                });
        });
    });
}

// A host tensor over a copy of a device tensor's whole storage, with the same view (shape,
// strides, offset); the tensor itself when it is on the host.
Tensor host_view(const Tensor& t) {
    if (t.device().kind == Device::Kind::cpu) return t;
    const auto& st = *t.storage();
    auto h = std::make_shared<detail::Storage>();
    h->ptr = core::host_alloc(st.bytes, &h->capacity);
    h->bytes = st.bytes;
    h->owned = true;
    core::copy_device_to_host(st.device, h->ptr, st.ptr, st.bytes);
    return Tensor(std::move(h), t.shape(), t.strides(), t.offset(), t.dtype());
}

}  // namespace

void Tensor::copy_from(const Tensor& src) const {
    require_defined(*this, "Tensor::copy_from (into)");
    require_defined(src, "Tensor::copy_from (from)");
    KILN_USER_CHECK(src.shape_ == shape_, "Tensor::copy_from: expected shape " << shape_to_string(shape_)
                                                                               << ", got " << shape_to_string(src.shape_));
    const Device dd = device(), sd = src.device();
    if (dd.kind == Device::Kind::cpu && sd.kind == Device::Kind::cpu) return copy_host(*this, src);
    if (numel() == 0) return;
    if (dd.kind == Device::Kind::cpu) return copy_host(*this, host_view(src));
    // Into a device tensor: a plain copy when both are dense with the same dtype, else
    // through the host.
    const auto bytes = static_cast<std::size_t>(numel()) * dtype_size(dtype_);
    if (is_contiguous() && src.is_contiguous() && src.dtype_ == dtype_) {
        if (sd.kind == Device::Kind::cpu) return core::copy_host_to_device(dd, data(), src.data(), bytes);
        if (sd == dd) return core::copy_device_to_device(dd, data(), src.data(), bytes);
    }
    if (is_contiguous()) {
        Tensor h = Tensor::empty(shape_, dtype_);
        copy_host(h, host_view(src));
        return core::copy_host_to_device(dd, data(), h.data(), bytes);
    }
    Tensor h = host_view(*this);  // the other elements of the storage keep their values
    copy_host(h, host_view(src));
    core::copy_host_to_device(dd, storage_->ptr, h.storage()->ptr, storage_->bytes);
}

Tensor Tensor::contiguous() const {
    require_defined(*this, "Tensor::contiguous");
    if (is_contiguous()) return *this;
    return clone();
}
Tensor Tensor::clone() const {
    require_defined(*this, "Tensor::clone");
    Tensor t = dense(shape_, dtype_, device(), "Tensor::clone");
    t.copy_from(*this);
    return t;
}
Tensor Tensor::astype(DType dtype) const {
    require_defined(*this, "Tensor::astype");
    Tensor t = dense(shape_, dtype, device(), "Tensor::astype");
    t.copy_from(*this);
    return t;
}
Tensor Tensor::to(Device device) const {
    require_defined(*this, "Tensor::to");
    if (device == this->device()) return *this;
    if (device.kind != Device::Kind::cpu) core::require_device(device, "Tensor::to");
    Tensor t = dense(shape_, dtype_, device, "Tensor::to");
    t.copy_from(*this);
    return t;
}

std::vector<double> Tensor::to_doubles() const {
    require_defined(*this, "Tensor::to_doubles");
    support::checked_bytes(shape_, sizeof(double), "Tensor::to_doubles");
    std::vector<double> out(static_cast<std::size_t>(numel()));
    if (out.empty()) return out;
    Tensor dst = wrap(out.data(), shape_, DType::f64);
    dst.copy_from(*this);
    return out;
}
std::vector<std::int64_t> Tensor::to_int64s() const {
    require_defined(*this, "Tensor::to_int64s");
    support::checked_bytes(shape_, sizeof(std::int64_t), "Tensor::to_int64s");
    std::vector<std::int64_t> out(static_cast<std::size_t>(numel()));
    if (out.empty()) return out;
    Tensor dst = wrap(out.data(), shape_, DType::i64);
    dst.copy_from(*this);
    return out;
}
double Tensor::item(const std::vector<std::int64_t>& index) const {
    require_defined(*this, "Tensor::item");
    KILN_USER_CHECK(static_cast<std::int64_t>(index.size()) == rank(),
                    "Tensor::item: expected " << rank() << " indices, got " << index.size());
    for (std::size_t i = 0; i < index.size(); ++i)
        KILN_USER_CHECK(index[i] >= 0 && index[i] < shape_[i],
                        "Tensor::item: index " << index[i] << " out of range for axis " << i << " of size " << shape_[i]);
    // Only now: the element exists, so its offset lies in the storage (a zero-size tensor's
    // strides may be huge, and index * stride overflow before a later axis of 0 rejects it).
    std::int64_t off = 0;
    for (std::size_t i = 0; i < index.size(); ++i) off += index[i] * strides_[i];
    if (device().kind != Device::Kind::cpu) {  // one element back from the device
        const std::size_t es = dtype_size(dtype_);
        alignas(8) unsigned char e[8];
        core::copy_device_to_host(device(), e, static_cast<const char*>(data()) + off * static_cast<std::int64_t>(es), es);
        return core::load_double(e, dtype_);
    }
    return core::load_double(static_cast<const char*>(data()) + off * static_cast<std::int64_t>(dtype_size(dtype_)),
                             dtype_);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& perm) const {
    require_defined(*this, "Tensor::permute");
    KILN_USER_CHECK(static_cast<std::int64_t>(perm.size()) == rank(),
                    "Tensor::permute: expected " << rank() << " axes, got " << perm.size());
    Shape s(perm.size());
    std::vector<std::int64_t> st(perm.size());
    std::vector<bool> seen(perm.size(), false);
    for (std::size_t i = 0; i < perm.size(); ++i) {
        std::int64_t a = norm_axis(perm[i], rank(), "Tensor::permute");
        KILN_USER_CHECK(!seen[a], "Tensor::permute: axis " << a << " repeats");
        seen[a] = true;
        s[i] = shape_[a];
        st[i] = strides_[a];
    }
    return Tensor(storage_, s, st, offset_, dtype_);
}
Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
    require_defined(*this, "Tensor::transpose");
    std::vector<std::int64_t> perm(shape_.size());
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
    std::swap(perm[norm_axis(a, rank(), "Tensor::transpose")], perm[norm_axis(b, rank(), "Tensor::transpose")]);
    return permute(perm);
}
Tensor Tensor::slice(std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) const {
    require_defined(*this, "Tensor::slice");
    axis = norm_axis(axis, rank(), "Tensor::slice");
    KILN_USER_CHECK(step >= 1, "Tensor::slice: expected step >= 1, got " << step);
    std::int64_t n = shape_[axis];
    auto clampi = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + n, 0) : std::min(v, n); };
    std::int64_t b = clampi(start), e = clampi(end);
    std::int64_t len = e > b ? (e - b - 1) / step + 1 : 0;
    Shape s = shape_;
    std::vector<std::int64_t> st = strides_;
    s[axis] = len;
    // With two or more elements, step < n, so the new stride stays inside the storage.
    if (len > 1) st[axis] = support::checked_mul(strides_[axis], step, "Tensor::slice: the stride");
    // The first element moves only when the view has one (then it lies in the storage); a
    // zero-size tensor's b * stride may overflow ([2^40,2^40,0] has strides [2^40,1,1]).
    bool none = len == 0;
    for (auto d : s) none = none || d == 0;
    return Tensor(storage_, s, st, offset_ + (none ? 0 : b * strides_[axis]), dtype_);
}
Tensor Tensor::broadcast_to(const Shape& shape) const {
    require_defined(*this, "Tensor::broadcast_to");
    support::checked_numel(shape, "Tensor::broadcast_to");
    KILN_USER_CHECK(shape.size() >= shape_.size(), "Tensor::broadcast_to: cannot broadcast " << shape_to_string(shape_)
                                                                                             << " to " << shape_to_string(shape));
    std::size_t lead = shape.size() - shape_.size();
    std::vector<std::int64_t> st(shape.size(), 0);
    for (std::size_t i = 0; i < shape_.size(); ++i) {
        std::int64_t want = shape[lead + i];
        if (shape_[i] == want) st[lead + i] = strides_[i];
        else KILN_USER_CHECK(shape_[i] == 1, "Tensor::broadcast_to: cannot broadcast " << shape_to_string(shape_)
                                                                                       << " to " << shape_to_string(shape));
    }
    return Tensor(storage_, shape, st, offset_, dtype_);
}
Tensor Tensor::unsqueeze(std::int64_t axis) const {
    require_defined(*this, "Tensor::unsqueeze");
    axis = norm_axis(axis, rank() + 1, "Tensor::unsqueeze");
    Shape s = shape_;
    std::vector<std::int64_t> st = strides_;
    s.insert(s.begin() + axis, 1);
    st.insert(st.begin() + axis, 0);
    return Tensor(storage_, s, st, offset_, dtype_);
}
Tensor Tensor::squeeze(std::int64_t axis) const {
    require_defined(*this, "Tensor::squeeze");
    axis = norm_axis(axis, rank(), "Tensor::squeeze");
    KILN_USER_CHECK(shape_[axis] == 1, "Tensor::squeeze: axis " << axis << " has size " << shape_[axis] << ", expected 1");
    Shape s = shape_;
    std::vector<std::int64_t> st = strides_;
    s.erase(s.begin() + axis);
    st.erase(st.begin() + axis);
    return Tensor(storage_, s, st, offset_, dtype_);
}
Tensor Tensor::reshape(const Shape& shape) const {
    require_defined(*this, "Tensor::reshape");
    KILN_USER_CHECK(support::checked_numel(shape, "Tensor::reshape") == numel(),
                    "Tensor::reshape: cannot reshape " << shape_to_string(shape_) << " (" << numel() << " elements) to "
                                                       << shape_to_string(shape));
    std::vector<std::int64_t> strides = support::checked_strides(shape, "Tensor::reshape");
    if (is_contiguous()) return Tensor(storage_, shape, std::move(strides), offset_, dtype_);
    Tensor c = clone();
    return Tensor(c.storage_, shape, std::move(strides), 0, dtype_);
}

std::string Tensor::to_string(std::int64_t max_elements) const {
    if (!defined()) return "Tensor(undefined)";
    if (device().kind != Device::Kind::cpu && numel() > 0) {  // one copy back, not one per element
        std::string s = host_view(*this).to_string(max_elements);
        return s.insert(s.size() - 1, ", " + device().to_string());
    }
    std::ostringstream os;
    os << "Tensor(" << dtype_name(dtype_) << shape_to_string(shape_) << ", [";
    // Reads only the elements it prints: a valid view may hold far more than memory (a
    // broadcast of one value to [2^31,2^31]).
    const std::int64_t n = numel(), shown = std::clamp<std::int64_t>(max_elements, 0, n);
    std::vector<std::int64_t> index(shape_.size(), 0);
    for (std::int64_t i = 0; i < shown; ++i) {
        os << (i ? ", " : "") << item(index);
        for (std::size_t d = index.size(); d-- > 0 && ++index[d] == shape_[d];) index[d] = 0;  // the next in row-major order
    }
    if (n > shown) os << (shown ? ", ..." : "...");
    os << "])";
    return os.str();
}
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace kiln
