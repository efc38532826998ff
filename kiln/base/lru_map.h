// A map bounded by the total weight of its values: past the bound, the
// entries used longest ago leave it. The in-process cache tiers (compiled
// payloads, ready programs) keep their entries in one. Not thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

namespace kiln {

template <class Key, class Value, class Hash = std::hash<Key>>
class LruMap {
 public:
  explicit LruMap(int64_t max_weight) : max_weight_(max_weight) {}

  // The value for `key`, marked used; null when absent.
  Value* find(const Key& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    used_.splice(used_.end(), used_, it->second.used);
    return &it->second.value;
  }
  bool contains(const Key& key) const { return entries_.count(key) != 0; }

  // Stores `value` (weighing `weight`) under `key`, replacing what was there,
  // marks it used, then drops the least recently used others until the map
  // is within its bound. The entry just stored stays, however heavy.
  Value& insert(const Key& key, Value value, int64_t weight) {
    auto [it, added] = entries_.try_emplace(key);
    if (added) {
      it->second.used = used_.insert(used_.end(), key);
    } else {
      weight_ -= it->second.weight;
      used_.splice(used_.end(), used_, it->second.used);
    }
    it->second.value = std::move(value);
    it->second.weight = weight;
    weight_ += weight;
    while (weight_ > max_weight_ && used_.front() != key) {
      auto oldest = entries_.find(used_.front());
      weight_ -= oldest->second.weight;
      entries_.erase(oldest);
      used_.pop_front();
    }
    return it->second.value;
  }

  void clear() {
    entries_.clear();
    used_.clear();
    weight_ = 0;
  }
  size_t size() const { return entries_.size(); }
  int64_t weight() const { return weight_; }

 private:
  struct Entry {
    Value value{};
    int64_t weight = 0;
    typename std::list<Key>::iterator used;  // its place in used_
  };
  std::unordered_map<Key, Entry, Hash> entries_;
  std::list<Key> used_;  // the keys, least recently used first
  int64_t weight_ = 0;
  int64_t max_weight_;
};

}  // namespace kiln
