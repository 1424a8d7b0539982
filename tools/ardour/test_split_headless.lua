-- The split action's parts that need no Editor, headless (ardour7-lua, or ardour8-lua in the
-- Debian 13 root): the same code the action runs (sb_common.lua), on a real session.
--   render: a trimmed region at gain 0.5 with a fade in, under a second region on a higher
--     layer, rendered to one WAV as it sounds; equal to Ardour's own bounce of the range
--     without processing, sample for sample;
--   separate: `stembridge separate --progress json` in the background, its pid, progress, done
--     and end events read while a tick is called; the stems add back to the render (< 1e-4);
--   cancel: the tick says cancel at the first progress line: exit 143, the process gone,
--     nothing written;
--   the track's Stembridge insert read as the dialog's defaults; earlier stems found; file
--     and group names the session has not taken; the JSON reader; Ardour 8.5+: the insert's
--     takes named after its track through a plugin property.
-- usage: ardourN-lua test_split_headless.lua WORKDIR SB_COMMON.lua STEMBRIDGE [driver]
local W, COMMON, CLI = assert (arg[1]), assert (arg[2]), assert (arg[3])
local DRIVER = arg[4] or "10x Speed"
local RATE = 48000
local URI = "https://stembridge.org/lv2/stembridge#stereo"
local failures = 0
local function check (cond, msg)
	if not cond then failures = failures + 1; print ("FAIL: " .. msg) end
	return cond
end
local _p = print
print = function (...) _p (...); io.stdout:flush () end

-- sb_common.lua as the action has it, returning its table
local src = assert (io.open (COMMON)):read ("a")
local SB = assert (load (src .. "\nreturn SB", "sb_common.lua", "t", _ENV)) ()

local function now () return ARDOUR.LuaAPI.monotonic_time () / 1e6 end
local function wait_until (cond, timeout, what)
	local t = now ()
	while not cond () do
		if now () - t > timeout then error ("timeout waiting for " .. what) end
		sleep (0.01)
	end
end
-- interleaved float samples of any audio file sox reads
local function samples (path)
	local raw = path .. ".f32"
	SB.run ("sox " .. SB.q (path) .. " -t f32 -e floating-point " .. SB.q (raw))
	local s = SB.read_all (raw) or ""
	os.remove (raw)
	local out, n = {}, #s // 4
	for i = 1, n do out[i] = string.unpack ("<f", s, 4 * i - 3) end
	return out
end
local function max_diff (a, b)
	if #a ~= #b then return math.huge end
	local d = 0
	for i = 1, #a do d = math.max (d, math.abs (a[i] - b[i])) end
	return d
end
local function peak (a)
	local p = 0
	for i = 1, #a do p = math.max (p, math.abs (a[i])) end
	return p
end

-- JSON, as the CLI writes it
do
	local v = SB.json_decode ('{"a":[1,-2.5e3,true,false,null,"x\\"y\\u00e9\\n"],"b":{}}')
	check (v and v.a[1] == 1 and v.a[2] == -2500 and v.a[3] == true and v.a[4] == false and
		v.a[5] == nil and next (v.b) == nil, "json: values")
	check (v and v.a[6] == 'x"y\u{e9}\n', "json: escapes " .. tostring (v and v.a[6]))
	for _, bad in ipairs ({ '{"a":', '[1,]x', '{"a" 1}', '"open', "" }) do
		local r, err = SB.json_decode (bad)
		check (r == nil and err, "json: '" .. bad .. "' refused")
	end
end
print ("json: checked")

os.execute ("rm -rf " .. SB.q (W) .. " && mkdir -p " .. SB.q (W))
local be = AudioEngine:set_backend ("None (Dummy)", "", "")
assert (be:set_driver (DRIVER) == 0, "set_driver")
assert (AudioEngine:set_device_name ("Sine Wave 1K, 1/3 Oct") == 0, "set_device_name")
assert (create_session (W .. "/sess", "sess", RATE), "create_session failed")
local tr = SB.only (Session:new_audio_track (2, 2, nil, 1, "Guitar", ARDOUR.PresentationInfo.max_order,
	ARDOUR.TrackMode.Normal, true)):to_track ()
wait_until (function () return tr:input ():audio (0):connected () end, 5, "auto-connect")
local TRS = ARDOUR.TransportRequestSource.TRS_UI
tr:rec_enable_control ():set_value (1, PBD.GroupControlDisposition.NoGroup)
Session:maybe_enable_record (false)
Session:request_locate (RATE, false, ARDOUR.LocateTransportDisposition.MustStop, TRS)
sleep (0.1)
Session:request_roll (TRS)
wait_until (function () return Session:transport_sample () >= RATE * 5 end, 60, "recording")
Session:request_stop (false, false, TRS)
wait_until (function () return Session:transport_stopped () and tr:playlist ():region_list ():size () > 0 end, 10, "capture")
tr:rec_enable_control ():set_value (0, PBD.GroupControlDisposition.NoGroup)
Session:disable_record (false, false)

-- the region as a user leaves it: trimmed, at gain 0.5, a long fade in; a copy of it on a
-- higher layer over its second half, at gain 0.25
local r
for x in tr:playlist ():region_list ():iter () do r = x end
r:trim_front (r:position () + Temporal.timecnt_t (4800))
local ar = r:to_audioregion ()
ar:set_scale_amplitude (0.5)
ar:set_fade_in_length (9600)
local pos, len, nch = r:position ():samples (), r:length ():samples (), ar:n_channels ()
local top = ARDOUR.RegionFactory.clone_region (r, false, false)
top:to_audioregion ():set_scale_amplitude (0.25)
tr:playlist ():add_region (top, Temporal.timepos_t (pos + len // 2), 1, false)
top:trim_end (Temporal.timepos_t (pos + len))
print (string.format ("region pos=%d len=%d nch=%d; layer on top at %d", pos, len, nch, pos + len // 2))

-- render: one float WAV, equal to Ardour's bounce of the range without processing
local render = W .. "/render.wav"
local t0 = now ()
local ok, err = SB.render (tr, pos, len, nch, render)
check (ok, "render: " .. tostring (err))
print (string.format ("render: %d frames x %d in %.3f s", len, nch, now () - t0))
local mine = samples (render)
local b = tr:bounce_range (pos, pos + len, ARDOUR.InterThreadInfo (), ARDOUR.LuaAPI.nil_proc (), false, "sb-check")
local chans = {}
for c = 0, b:to_audioregion ():n_channels () - 1 do chans[c + 1] = samples (b:source (c):to_filesource ():path ()) end
local bounced = {}
for i = 1, #chans[1] do for c = 1, #chans do bounced[#bounced + 1] = chans[c][i] end end
b = nil
local d = max_diff (mine, bounced)
print (string.format ("render vs bounce: %d samples each, max difference %.3g, peak %.3f", #mine, d, peak (mine)))
check (#mine == len * nch, "render: " .. #mine .. " samples, want " .. len * nch)
check (d == 0, "render differs from Ardour's bounce by " .. d)
check (peak (mine) > 0.01, "render is silent: nothing was tested")
-- a cancelled render leaves no file
check (not SB.render (tr, pos, len, nch, W .. "/cancelled.wav", function (f) return f > 0.2 end) and
	not SB.exists (W .. "/cancelled.wav"), "render: a cancelled render left its file")

-- separate: the CLI in the background, its JSON read while the tick runs
local events, ticks = {}, 0
local cmd = SB.q (CLI) .. " separate " .. SB.q (render) .. " -o " .. SB.q (W .. "/stems") ..
	" --progress json --model builtin --device cpu --timeline-start " .. pos
local rc, pid, cancelled = SB.separate (cmd, W, function (ev) events[#events + 1] = ev end,
	function () ticks = ticks + 1; return false end)
print (string.format ("separate: exit %s, pid %s, %d events, %d ticks", tostring (rc), tostring (pid), #events, ticks))
check (rc == 0 and not cancelled, "separate: exit " .. tostring (rc))
check (events[1] and events[1].event == "start" and events[1].pid == pid, "separate: the pid first")
local done = events[#events - 1]
check (events[#events] and events[#events].event == "end" and events[#events].exit == 0, "separate: the end last")
check (done and done.event == "done" and #done.stems == 4, "separate: a done event with four stems")
if done and done.stems then
	local sum
	for _, s in ipairs (done.stems) do
		local x = samples (s.path)
		sum = sum or {}
		for i = 1, #x do sum[i] = (sum[i] or 0) + x[i] end
	end
	local e = max_diff (sum or {}, mine)
	print (string.format ("stems add back to the render: max difference %.3g", e))
	check (e < 1e-4, "the stems do not add back to the render: " .. e)
	local txt = SB.read_all (done.stems_txt) or ""
	check (txt:match ("^timeline_start (%d+)") == tostring (pos), "stems.txt: " .. txt:sub (1, 40))
end

-- cancel at the first progress line: SIGTERM, exit 143, no process, nothing written
local long = W .. "/long.wav"
SB.run ("sox -n -r 48000 -c 2 " .. SB.q (long) .. " synth 20 pinknoise vol 0.2")
events = {}
local saw_progress = false
rc, pid, cancelled = SB.separate ("SB_FAULT_INJECT=job:slow:200 " .. SB.q (CLI) .. " separate " ..
	SB.q (long) .. " -o " .. SB.q (W .. "/cancel") .. " --progress json --model builtin --device cpu",
	W .. "/cancel-run", function (ev)
		events[#events + 1] = ev
		saw_progress = saw_progress or ev.event == "progress"
	end, function () return saw_progress end) -- Cancel, once the job runs
print (string.format ("cancel: exit %s, pid %s, cancelled %s", tostring (rc), tostring (pid), tostring (cancelled)))
check (cancelled and rc == 143, "cancel: exit " .. tostring (rc) .. ", want 143")
check (events[#events] and events[#events].exit == 143, "cancel: the end event says 143")
check (pid and (SB.capture ("(kill -0 " .. pid .. " && echo alive)") or "") == "", "cancel: the process is still there")
local left = SB.capture ("find " .. SB.q (W .. "/cancel") .. " -type f 2>/dev/null") or ""
check (left == "", "cancel: left " .. left)

-- the track's insert gives the dialog its defaults
local proc = ARDOUR.LuaAPI.new_plugin (Session, URI, ARDOUR.PluginType.LV2, "")
if check (not proc:isnil (), "Stembridge not found (LV2_PATH?)") then
	assert (tr:add_processor_by_index (proc, 0, nil, true) == 0)
	local function set (port, v) assert (ARDOUR.LuaAPI.set_processor_param (proc, port, v)) end
	check (SB.plugin_on (tr) ~= nil, "plugin_on: the insert not found")
	local c = SB.plugin_choices (SB.plugin_on (tr))
	check (c.device == "auto" and c.model == "auto" and c.precision == "fp32" and
		table.concat (c.stems, ",") == "vocals,drums,bass,other,guitar,piano",
		"plugin defaults: " .. c.device .. " " .. c.model .. " " .. c.precision .. " " .. table.concat (c.stems, ","))
	set (SB.P.device, 1); set (SB.P.model, 0); set (SB.P.precision, 1); set (SB.P.stem_drums, 0)
	c = SB.plugin_choices (SB.plugin_on (tr))
	check (c.device == "cpu" and c.model == "builtin" and c.precision == "bf16" and
		table.concat (c.stems, ",") == "vocals,bass,other,guitar,piano",
		"plugin choices: " .. c.device .. " " .. c.model .. " " .. c.precision .. " " .. table.concat (c.stems, ","))
	set (SB.P.device, 3)
	check (SB.plugin_choices (SB.plugin_on (tr)).device == "device:1", "Device 2 is device:1")
	if ARDOUR.LuaAPI.set_plugin_insert_property then
		-- Ardour keeps only Path and Float property values it hears back, so the string is read
		-- where the plugin keeps it: its saved state
		check (SB.name_takes_after (proc, tr), "name_takes_after: the property was not set")
		sleep (0.3)
		Session:save_state ("")
		local id = proc:to_stateful ():id ():to_s ()
		local ttl = SB.capture ("cat " .. SB.q (Session:path ():gsub ("/$", "") .. "/plugins/" .. id) ..
			"/state*/state.ttl") or ""
		local got = ttl:match ('trackName>%s*"([^"]*)"') or ttl:match ('trackName%s*"([^"]*)"')
		check (got == "Guitar", "the insert's saved trackName is " .. tostring (got))
		print ("trackName set through set_plugin_insert_property, saved as: " .. tostring (got))
	else
		check (not SB.name_takes_after (proc, tr), "7.3 has no property API, yet it said set")
		print ("trackName: skipped, this Ardour's Lua cannot set plugin properties (8.5 can)")
	end
end
proc = nil

-- earlier stems: a track "Guitar - vocals" with a region at the region's place
local st = SB.only (Session:new_audio_track (2, 2, nil, 1, "Guitar - vocals", ARDOUR.PresentationInfo.max_order,
	ARDOUR.TrackMode.Normal, true)):to_track ()
local copy = ARDOUR.RegionFactory.clone_region (r, false, false)
st:playlist ():add_region (copy, Temporal.timepos_t (pos), 1, false)
local e = SB.earlier_stems ("Guitar", pos, len)
check (e.vocals ~= nil and e.drums == nil, "earlier_stems: vocals found, no drums")
check (next (SB.earlier_stems ("Guitar", pos + 1, len)) == nil, "earlier_stems: another place is not the region")
st, copy, e = nil, nil, nil

-- names: a group the session has not taken
Session:new_route_group ("take 1")
check (SB.free_group_name ("take 1") == "take 1 (2)" and SB.free_group_name ("take 2") == "take 2",
	"free_group_name")

tr, r, ar, top = nil, nil, nil, nil
collectgarbage ()
Session:save_state ("")
close_session ()
print (failures == 0 and "ALL OK" or (failures .. " failure(s)"))
if failures > 0 then error ("FAILED") end
