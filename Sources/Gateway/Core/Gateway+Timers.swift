extension Gateway {
    /// Runs everything that is due at the clock's current time: deferred and heartbeat
    /// publishes, states held for Home Assistant, discovery republishing, advertisement
    /// availability timeouts, reconnect retries, polls, command connection waits that
    /// expired, idle disconnects of on-demand connections, forgetting silent devices and
    /// `bridge/health`.
    public func tick() {
        let now = clock.now()
        if let due = discoveryRepublishAt, now >= due { republishDiscovery() }
        publishPendingDevices(at: now)
        for index in devices.indices {
            let rule = rule(index)
            if let held = devices[index].stateHeldUntil {
                if now >= held { releaseHeldStates(index, now: now) }
            } else if devices[index].rate.due(now: now, settings: rule.rateControl) {
                publishState(index, now: now)
            }
            if !rule.connect, config.availability.enabled, devices[index].availability.published == true,
                let deadline = devices[index].availability.deadline(settings: config.availability, fixedTimeout: rule.availabilityTimeout),
                now >= deadline
            {
                publishAvailability(index, online: false)
                publishEvent("device_unavailable", index)
            }
            if let retry = devices[index].retryAt, now >= retry {
                devices[index].retryAt = nil
                if devices[index].link == .idle { requestConnection(index, urgent: false) }
            }
            if devices[index].link == .connected {
                for spec in devices[index].pollDue.indices where now >= devices[index].pollDue[spec] {
                    devices[index].pollDue[spec] = now + (rule.poll[spec].interval ?? 60)
                    enqueue(DeviceJob(kind: .poll(spec), receivedAt: now), for: index)
                }
                if let idle = devices[index].idleDisconnectAt, now >= idle,
                    !(queues[devices[index].address] ?? []).isEmpty || draining.contains(devices[index].address)
                {
                    devices[index].idleDisconnectAt = now + config.commands.idleDisconnect
                } else if let idle = devices[index].idleDisconnectAt, now >= idle {
                    devices[index].idleDisconnectAt = nil
                    devices[index].link = .disconnecting
                    let address = devices[index].address
                    let ble = self.ble
                    Task { await ble.disconnect(address) }
                }
            }
        }
        expireConnectionWaiters(now)
        forgetSilentDevices(now: now)
        if let due = nextHealthAt, now >= due {
            nextHealthAt = max(due + config.health.interval, now)
            publishHealth(now: now)
        }
    }

    private func expireConnectionWaiters(_ now: Double) {
        for (address, waiters) in connectWaiters {
            let expired = waiters.filter { ($0.expiresAt ?? .infinity) <= now }
            guard !expired.isEmpty else { continue }
            let remaining = waiters.filter { ($0.expiresAt ?? .infinity) > now }
            connectWaiters[address] = remaining.isEmpty ? nil : remaining
            for waiter in expired { waiter.continuation.resume(throwing: JobFailure.expired) }
            if remaining.isEmpty, let index = indexByAddress[address], devices[index].link == .queued, !rule(index).connect {
                devices[index].link = .idle
                for next in scheduler.release(address) { startConnecting(next) }
            }
        }
    }

    /// The earliest time something is due.
    func nextDeadline() -> Double? {
        var next = min(discoveryRepublishAt ?? .infinity, nextHealthAt ?? .infinity, pendingDevicesDeadline ?? .infinity)
        for index in devices.indices {
            let device = devices[index]
            if let held = device.stateHeldUntil { next = min(next, held) }
            if let forget = forgetDeadline(index) { next = min(next, forget) }
            if let retry = device.retryAt { next = min(next, retry) }
            if let idle = device.idleDisconnectAt { next = min(next, idle) }
            if device.link == .connected, let poll = device.pollDue.min() { next = min(next, poll) }
            let rule = rule(index)
            if let deadline = device.rate.nextDeadline(settings: rule.rateControl) { next = min(next, deadline) }
            if !rule.connect, device.availability.published == true,
                let deadline = device.availability.deadline(settings: config.availability, fixedTimeout: rule.availabilityTimeout)
            {
                next = min(next, deadline)
            }
        }
        for waiters in connectWaiters.values {
            for waiter in waiters { if let expiry = waiter.expiresAt { next = min(next, expiry) } }
        }
        return next.isFinite ? next : nil
    }

    /// Makes sure the timer wakes up by `deadline` (restarting it when it sleeps longer).
    func armTimer(_ deadline: Double) {
        guard started else { return }
        if let sleeping = sleepingUntil, sleeping <= deadline, timerTask != nil { return }
        timerTask?.cancel()
        sleepingUntil = deadline
        let clock = self.clock
        timerTask = Task { [weak self] in
            var target = deadline
            while !Task.isCancelled {
                do { try await clock.sleep(until: target) } catch { return }
                guard let self else { return }
                target = await self.timerFired()
            }
        }
    }

    private func timerFired() -> Double {
        tick()
        let now = clock.now()
        let target = max(now + 0.01, min(nextDeadline() ?? now + 3600, now + 3600))
        sleepingUntil = target
        return target
    }
}
