-- Headless Ardour 7 test of the Stembridge plugin (ardour7-lua, Dummy backend).
-- A session with two stereo tracks carrying the plugin; a region recorded from the Dummy's
-- generator; the plugin records the region as it plays and separates it; the stems are placed
-- on new tracks at the region's position (headless Lua cannot import a file, so each stem is
-- rendered by bounce_range with the plugin auditioning it: ../shared/HOSTS.md); the session is
-- saved, reopened, and the device choices are still there. Before that, the plugins are armed
-- while Ardour records with its default monitoring (handled by the audio hardware): a recording
-- track feeds its plugins silence, and the plugin must say the take is silent and write nothing.
-- Saved twice with nothing changed, the session keeps the same plugin state.
-- Usage: ardour7-lua test_headless.lua SESSION_DIR IMPORT_SCRIPT [driver]
-- Exit 0 when every assertion held.
-- The one route of a RouteList, as a copy: new_audio_track(...):front() is a reference into the
-- temporary list, which dangles once Lua collects it.
local function only(list) local one; for r in list:iter() do one = r end; return one end
local DIR    = assert(arg[1], "session dir")
local IMPORT = assert(arg[2], "path of stembridge_import.lua")
local DRIVER = arg[3] or "10x Speed"
local URI    = "https://stembridge.org/lv2/stembridge#stereo"
local NAME   = "sb"
local RATE   = 48000
-- control port numbers as Ardour counts them (control ports only, inputs and outputs)
local P_RECORD, P_DEVICE, P_AUDITION, P_STATE, P_DEVICE_OUT, P_FALLBACK, P_JOBS = 0, 1, 8, 9, 11, 12, 13
local P_STATE_SILENT = 6
local STEMS = { "vocals", "drums", "bass", "other" }

-- the importer's parser, loaded from the shipped script (its header needs ardour{})
ardour = function() end
dofile(IMPORT)

local function now() return ARDOUR.LuaAPI.monotonic_time() / 1e6 end
local function wait_until(cond, timeout, what)
	local t = now()
	while not cond() do
		if now() - t > timeout then error("timeout waiting for " .. what) end
		sleep(0.01)
	end
end
local function param(p, n) return (ARDOUR.LuaAPI.get_processor_param(p, n, true)) end
local function first_region(tr) for r in tr:playlist():region_list():iter() do return r end end
local TRS = ARDOUR.TransportRequestSource.TRS_UI

os.execute("rm -rf '" .. DIR .. "'")
local be = AudioEngine:set_backend("None (Dummy)", "", "")
assert(be and not be:isnil(), "set_backend failed")
assert(be:set_driver(DRIVER) == 0, "set_driver failed")
assert(AudioEngine:set_device_name("Sine Wave 1K, 1/3 Oct") == 0, "set_device_name failed")
assert(create_session(DIR, NAME, RATE), "create_session failed")

tracks, procs = {}, {}
for i, name in ipairs({ "Guitar", "Keys" }) do
	local tr = only(Session:new_audio_track(2, 2, nil, 1, name, ARDOUR.PresentationInfo.max_order,
		ARDOUR.TrackMode.Normal, true))
	assert(tr and not tr:isnil(), "new_audio_track failed")
	local proc = ARDOUR.LuaAPI.new_plugin(Session, URI, ARDOUR.PluginType.LV2, "")
	assert(not proc:isnil(), "Stembridge not found: is LV2_PATH set?")
	assert(tr:add_processor_by_index(proc, 0, nil, true) == 0, "add_processor_by_index failed")
	tracks[i], procs[i] = tr, proc
	wait_until(function() return tr:input():audio(0):connected() end, 5, "input auto-connect")
end
-- Guitar on the CPU; Keys on "Device 3", which this machine lacks
assert(ARDOUR.LuaAPI.set_processor_param(procs[1], P_DEVICE, 1))
assert(ARDOUR.LuaAPI.set_processor_param(procs[2], P_DEVICE, 4))

-- record a region on both tracks from 1 s, the plugins armed: with Ardour's default monitoring
-- they hear silence (../shared/HOSTS.md), and must say so rather than separate it
print("MONITORING", ARDOUR.config():get_monitoring_model())
-- "handled by: audio hardware" is ExternalMonitoring; only SoftwareMonitoring feeds plugins
assert(ARDOUR.config():get_monitoring_model() ~= ARDOUR.MonitorModel.SoftwareMonitoring,
	"this test needs Ardour's default monitoring model")
for _, p in ipairs(procs) do assert(ARDOUR.LuaAPI.set_processor_param(p, P_RECORD, 1)) end
local REC0 = RATE
for _, tr in ipairs(tracks) do tr:rec_enable_control():set_value(1, PBD.GroupControlDisposition.NoGroup) end
Session:maybe_enable_record(false)
Session:request_locate(REC0, false, ARDOUR.LocateTransportDisposition.MustStop, TRS)
sleep(0.1)
Session:request_roll(TRS)
wait_until(function() return Session:transport_sample() >= REC0 + 3 * RATE end, 60, "recording")
Session:request_stop(false, false, TRS)
wait_until(function() return Session:transport_stopped() and tracks[1]:playlist():region_list():size() > 0 end, 10, "capture")
for _, tr in ipairs(tracks) do tr:rec_enable_control():set_value(0, PBD.GroupControlDisposition.NoGroup) end
Session:disable_record(false, false)
for i, p in ipairs(procs) do
	assert(ARDOUR.LuaAPI.set_processor_param(p, P_RECORD, 0))
	wait_until(function() return param(p, P_STATE) == P_STATE_SILENT end, 30, "silent take on track " .. i)
	assert(param(p, P_JOBS) == 0, "track " .. i .. ": a silent take was separated")
end
assert(not sb_find_stems_txt(Session:path():gsub("/$", ""), procs[1]:to_stateful():id():to_s()),
	"a silent take left stems")
print("SILENT TAKES REPORTED", param(procs[1], P_STATE), param(procs[2], P_STATE))
reg = first_region(tracks[1])
local rpos, rlen = reg:position():samples(), reg:length():samples()
print("REGION", reg:name(), rpos, rlen)

-- play the region through the armed plugins: each records it and separates it. The transport
-- starts half a second early: Ardour declicks the first ~35 ms after a start, which the take
-- would carry but an offline bounce does not; before the region that fade acts on silence.
local PREROLL = RATE // 2
for _, p in ipairs(procs) do assert(ARDOUR.LuaAPI.set_processor_param(p, P_RECORD, 1)) end
Session:request_locate(rpos - PREROLL, false, ARDOUR.LocateTransportDisposition.MustStop, TRS)
sleep(0.2)
Session:request_roll(TRS)
wait_until(function() return Session:transport_sample() >= rpos + rlen end, 60, "playback")
Session:request_stop(false, false, TRS)
wait_until(function() return Session:transport_stopped() end, 10, "stop")
for _, p in ipairs(procs) do assert(ARDOUR.LuaAPI.set_processor_param(p, P_RECORD, 0)) end
for i, p in ipairs(procs) do
	wait_until(function() return param(p, P_JOBS) >= 1 or param(p, P_STATE) == 5 end, 600, "separation " .. i)
	assert(param(p, P_JOBS) >= 1, "track " .. i .. ": the job failed (state " .. param(p, P_STATE) .. ")")
end
print("SEPARATED", "device in use", param(procs[1], P_DEVICE_OUT), param(procs[2], P_DEVICE_OUT))

-- the stems are in Ardour's scratch folder for the insert, and stems.txt gives the region start
local txt = sb_find_stems_txt(Session:path():gsub("/$", ""), procs[1]:to_stateful():id():to_s())
assert(txt, "no stems.txt in the insert's scratch folder")
local take = assert(sb_parse_stems_txt(txt))
print("STEMS.TXT", txt, "start", take.start, "files", #take.files)
assert(#take.files == 4, "expected 4 stems")
local start = take.start
-- the plugin starts the take at the first sample it hears rolling: the locate point
assert(start == rpos - PREROLL, "recorded start " .. tostring(start) .. ", transport started at " .. rpos - PREROLL)

-- The largest |sum of the stem regions - mix region| over both channels, sample by sample
-- through each region's Readable interface (as Ardour's s_region_gain.lua reads regions).
local function sum_error(mix, stems, len)
	local CH = 8192
	local shm = {}
	for i = 1, 5 do shm[i] = ARDOUR.DSP.DspShm(CH) end
	local rd = { mix:to_audioregion():to_readable() }
	for k = 1, 4 do rd[k + 1] = stems[k]:to_audioregion():to_readable() end
	local worst, peak = 0, 0
	for c = 0, 1 do
		local pos = 0
		while pos < len do
			local n = math.min(CH, len - pos)
			local a = {}
			for i = 1, 5 do
				assert(rd[i]:read(shm[i]:to_float(0), pos, n, c) == n, "short read")
				a[i] = shm[i]:to_float(0):array()
			end
			for j = 1, n do
				local e = math.abs(a[2][j] + a[3][j] + a[4][j] + a[5][j] - a[1][j])
				if e > worst then worst = e end

				if math.abs(a[1][j]) > peak then peak = math.abs(a[1][j]) end
			end
			pos = pos + n
		end
	end
	return worst, peak
end

-- place each stem on its own track at the recorded position (audition stem k + bounce)
local peaks, bounced = {}, {}
for k, stem in ipairs(STEMS) do
	assert(ARDOUR.LuaAPI.set_processor_param(procs[1], P_AUDITION, k))
	local b = tracks[1]:bounce_range(start, rpos + rlen, ARDOUR.InterThreadInfo(), procs[1], true, "Guitar - " .. stem)
	assert(b and not b:isnil(), "bounce_range failed")
	local nt = only(Session:new_audio_track(2, 2, nil, 1, "Guitar - " .. stem, ARDOUR.PresentationInfo.max_order,
		ARDOUR.TrackMode.Normal, true))
	nt:playlist():add_region(b, Temporal.timepos_t(start), 1, false)
	bounced[k] = b
	peaks[k] = b:to_audioregion():maximum_amplitude(nil)
	print("STEM TRACK", nt:name(), "pos", first_region(nt):position():samples(), "peak", peaks[k])
end
assert(ARDOUR.LuaAPI.set_processor_param(procs[1], P_AUDITION, 0))
-- what the track plays there with audition off (the region, its fades included): the stems
-- placed at the take's start must add back to it, sample for sample
local mix = tracks[1]:bounce_range(start, rpos + rlen, ARDOUR.InterThreadInfo(), procs[1], true, "Guitar - mix")
assert(mix and not mix:isnil(), "bounce_range of the mix failed")
local worst, peak = sum_error(mix, bounced, rpos + rlen - start)
print(string.format("STEMS ADD BACK: worst %.3g over %d samples, mix peak %.3f", worst, rpos + rlen - start, peak))
assert(peak > 0.01, "the recorded region is silent: nothing was tested")
assert(worst < 1e-4, "the placed stems do not add back to the region: " .. worst)
for k = 1, 4 do
	assert(math.abs(peaks[k] - peak) > 1e-3 or peaks[k] < 1e-6 or k == 4,
		"stem " .. STEMS[k] .. " has the mix's peak: audition did not engage")
end

-- saved twice with nothing changed: the same plugin state (Ardour keeps state<N> when the new
-- state equals the last, and writes state<N+1> when it differs)
local function state_dirs()
	local f = assert(io.open(Session:path():gsub("/$", "") .. "/" .. NAME .. ".ardour", "r"))
	local x = f:read("*a")
	f:close()
	local t = {}
	for d in x:gmatch('state%-dir="([^"]+)"') do table.insert(t, d) end
	return table.concat(t, ",")
end
assert(Session:save_state("") == 0, "save_state failed")
local dirs1 = state_dirs()
sleep(0.5)
assert(Session:save_state("") == 0, "second save_state failed")
local dirs2 = state_dirs()
print("STATE DIRS", dirs1, dirs2)
assert(dirs1 ~= "" and dirs1 == dirs2, "saved twice, the plugin state changed: " .. dirs1 .. " then " .. dirs2)
-- Lua must drop its references to routes and processors before the session goes, or their
-- destructors run at exit after the engine (a crash in Ardour's teardown).
tracks, procs, reg, mix, bounced = nil, nil, nil, nil, nil
collectgarbage()
close_session()
assert(load_session(DIR, NAME), "load_session failed")
g = Session:route_by_name("Guitar")
k = Session:route_by_name("Keys")
pg, pk = g:nth_plugin(0), k:nth_plugin(0)
assert(not pg:isnil() and not pk:isnil(), "plugins missing after reload")
print("RELOADED device", param(pg, P_DEVICE), param(pk, P_DEVICE))
assert(param(pg, P_DEVICE) == 1, "Guitar's device choice lost")
assert(param(pk, P_DEVICE) == 4, "Keys' device choice lost")
-- Keys asked for a device this machine lacks: it keeps the choice and shows the fallback
wait_until(function() return param(pk, P_FALLBACK) == 1 end, 30, "fallback shown on Keys")
for _, stem in ipairs(STEMS) do
	local t = Session:route_by_name("Guitar - " .. stem)
	assert(t and not t:isnil(), "stem track missing after reload: " .. stem)
	local r = first_region(t:to_track())
	assert(r:position():samples() == start, "stem " .. stem .. " at " .. r:position():samples())
end
g, k, pg, pk = nil, nil, nil, nil
collectgarbage()
close_session()
print("ALL OK")
